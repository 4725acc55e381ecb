package config

import (
	"bytes"
	"strings"
	"testing"
)

// TestEveryVariableIsDocumented: every row of the table says what it does,
// every setting but a switch says its bounds, and the defaults are within
// them (a default the validator would refuse is a bug in one or the other).
func TestEveryVariableIsDocumented(t *testing.T) {
	cfg := Defaults()
	for _, v := range variables(&cfg) {
		if strings.TrimSpace(v.doc) == "" {
			t.Errorf("%s: no doc", v.name)
		}
		if v.rule.text == "" && !strings.HasSuffix(v.name, "_FOUR_EYES") && !strings.HasSuffix(v.name, "_ALLOW_PRIVATE") {
			t.Errorf("%s: no bounds", v.name)
		}
		if v.rule.check != nil {
			if msg := v.rule.check(); msg != "" {
				t.Errorf("%s: the default is out of its own bounds: %s", v.name, msg)
			}
		}
	}
	var b bytes.Buffer
	if err := Reference(&b); err != nil {
		t.Fatal(err)
	}
	for _, name := range Variables() {
		if !strings.Contains(b.String(), "`"+name+"`") {
			t.Errorf("the reference does not name %s", name)
		}
	}
}

// TestRulesAreEnforced: a value outside a table rule's bounds is an error
// naming the variable, in the part that validates it.
func TestRulesAreEnforced(t *testing.T) {
	for name, value := range map[string]string{
		"PUSHFAN_CONCURRENCY":     "20001",
		"PUSHFAN_PLAN_PARALLEL":   "-1",
		"PUSHFAN_START_SPREAD":    "11m",
		"PUSHFAN_WEBHOOK_TIMEOUT": "2m",
		"PUSHFAN_LOG_LEVEL":       "loud",
		"PUSHFAN_FCM_CLIENT":      "grpc",
		"PUSHFAN_STATS_CACHE":     "-1s",
	} {
		_, err := Load(env(with(map[string]string{name: value})))
		if err == nil || !strings.Contains(err.Error(), name+": must") {
			t.Errorf("%s=%s: error %v", name, value, err)
		}
	}
	if _, err := Load(env(with(map[string]string{"PUSHFAN_LOG_LEVEL": "DEBUG"}))); err != nil {
		t.Errorf("a log level in capitals: %v", err)
	}
	// migrate validates the database and the log, not the engine.
	if _, err := LoadParts(env(with(map[string]string{"PUSHFAN_CONCURRENCY": "0"})), PartDatabase|PartLog); err != nil {
		t.Errorf("an engine setting checked for migrate: %v", err)
	}
	if _, err := LoadParts(env(with(map[string]string{"PUSHFAN_DB_MAX_OPEN": "0"})), PartDatabase); err == nil {
		t.Error("PUSHFAN_DB_MAX_OPEN=0 accepted for migrate")
	}
}
