package rules

import (
	"testing"
	"time"

	"pushfan/audience"
)

// namedSet holds audiences of defs (compiled, never run) for rules tests:
// their SQL only has to compile.
func namedSet(t *testing.T, defs ...audience.Definition) *audience.Catalog {
	t.Helper()
	for i := range defs {
		if defs[i].SQL == "" {
			defs[i].SQL = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after ORDER BY t.id LIMIT :limit"
		}
	}
	auds, err := audience.Compile(defs)
	if err != nil {
		t.Fatal(err)
	}
	appOf := func(app string) string {
		if app == "" {
			return "default"
		}
		return app
	}
	return audience.NewCatalog(audience.NewSet(auds, defs, appOf, time.Now()))
}
