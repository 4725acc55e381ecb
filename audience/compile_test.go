package audience

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// renewalSQL is the example audience of the issue, with `cursor` quoted
// (CURSOR is a reserved word).
const renewalSQL = "SELECT t.id AS `cursor`, t.user_id, t.token, s.plan, s.amount, DATE_FORMAT(s.renews_on, '%Y-%m-%d') AS renews_on\n" +
	"FROM device_tokens t JOIN users u ON u.id = t.user_id JOIN subscriptions s ON s.user_id = t.user_id\n" +
	"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND s.reminders = 1\n" +
	"  AND u.locale = :locale AND s.renews_on = CURRENT_DATE + INTERVAL :days_before DAY\n" +
	"ORDER BY t.id LIMIT :limit"

func renewalDef() Definition {
	return Definition{
		Name:        "renewal_due",
		Description: "renews in days_before days",
		Params:      map[string]string{"days_before": TypeInt, "locale": TypeString},
		SQL:         renewalSQL,
	}
}

func TestCompile(t *testing.T) {
	auds, err := Compile([]Definition{renewalDef()})
	if err != nil {
		t.Fatal(err)
	}
	a := auds[0]
	if a.Name() != "renewal_due" || a.Description() != "renews in days_before days" || a.SQL() != renewalSQL {
		t.Errorf("accessors: %q %q", a.Name(), a.Description())
	}
	if !maps.Equal(a.ParamTypes(), map[string]string{"days_before": "int", "locale": "string"}) {
		t.Errorf("ParamTypes = %v", a.ParamTypes())
	}
	if want := []string{"after", "locale", "days_before", "limit"}; !slices.Equal(a.argNames, want) {
		t.Errorf("argument order = %q, want %q", a.argNames, want)
	}
	for _, n := range a.argNames {
		if strings.Contains(a.query, ":"+n) {
			t.Errorf("query still has :%s: %s", n, a.query)
		}
	}
	if got := strings.Count(a.query, "?"); got != 4 {
		t.Errorf("query has %d ?, want 4: %s", got, a.query)
	}
	if a.Vars() != nil {
		t.Errorf("Vars before Check = %v, want nil", a.Vars())
	}
	// ParamTypes is a copy.
	a.ParamTypes()["x"] = "int"
	if _, ok := a.ParamTypes()["x"]; ok {
		t.Error("ParamTypes exposes the audience's own map")
	}
	// No params at all is fine.
	if _, err := Compile([]Definition{{Name: "everyone", SQL: "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"}}); err != nil {
		t.Errorf("no params: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	const base = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after"
	tests := []struct {
		name string
		defs []Definition
		want []string // every one must be in the error
	}{
		{"missing :after", []Definition{{Name: "a1", SQL: "SELECT 1 FROM t LIMIT :limit"}},
			[]string{`audience "a1": sql does not use :after`}},
		{"missing :limit", []Definition{{Name: "a2", SQL: base + " ORDER BY t.id LIMIT 10"}},
			[]string{`audience "a2": sql does not use :limit`}},
		{"missing both, each reported", []Definition{{Name: "a3", SQL: "SELECT 1"}},
			[]string{`audience "a3": sql does not use :after`, `audience "a3": sql does not use :limit`}},
		{"undeclared param", []Definition{{Name: "a4", SQL: base + " AND t.platform = :platform LIMIT :limit"}},
			[]string{`audience "a4": sql uses :platform, which is not declared under params`}},
		{"unused declared param", []Definition{{Name: "a5", Params: map[string]string{"locale": "string"}, SQL: base + " LIMIT :limit"}},
			[]string{`audience "a5": param "locale" is declared but the sql never uses :locale`}},
		{"placeholder only in a string does not count", []Definition{{Name: "a6", Params: map[string]string{"x": "string"}, SQL: base + " AND t.token <> ':x' LIMIT :limit"}},
			[]string{`audience "a6": param "x" is declared but the sql never uses :x`}},
		{"unknown type", []Definition{{Name: "a7", Params: map[string]string{"n": "integer"}, SQL: base + " AND t.user_id = :n LIMIT :limit"}},
			[]string{`audience "a7": param "n" has unknown type "integer"`}},
		{"duplicate name", []Definition{{Name: "dup", SQL: base + " LIMIT :limit"}, {Name: "dup", SQL: base + " LIMIT :limit"}},
			[]string{`audience "dup": duplicate name (audience #1 has it too)`}},
		{"empty name", []Definition{{SQL: base + " LIMIT :limit"}},
			[]string{`audience #1: name is empty`}},
		{"bad name", []Definition{{Name: "a b/c", SQL: base + " LIMIT :limit"}},
			[]string{`audience "a b/c": name may hold only letters, digits, _ and -`}},
		{"built-in name", []Definition{{Name: "all", SQL: base + " LIMIT :limit"}},
			[]string{`audience "all": name is reserved`}},
		{"reserved param", []Definition{{Name: "a8", Params: map[string]string{"after": "int"}, SQL: base + " LIMIT :limit"}},
			[]string{`audience "a8": param "after" is reserved`}},
		{"param name not an identifier", []Definition{{Name: "a9", Params: map[string]string{"1x": "int"}, SQL: base + " LIMIT :limit"}},
			[]string{`audience "a9": param "1x": a name must be`}},
		{"empty sql", []Definition{{Name: "a10"}}, []string{`audience "a10": sql is empty`}},
		{"not a select", []Definition{{Name: "a11", SQL: "DELETE FROM device_tokens WHERE id > :after LIMIT :limit"}},
			[]string{`audience "a11": sql must be a SELECT`}},
		{"two statements", []Definition{{Name: "a12", SQL: base + " LIMIT :limit; DROP TABLE users"}},
			[]string{`audience "a12": sql: more than one statement`}},
		{"positional placeholder", []Definition{{Name: "a13", SQL: base + " AND t.user_id = ? LIMIT :limit"}},
			[]string{`audience "a13": sql: positional ? placeholder`}},
		{"every audience reported", []Definition{
			{Name: "ok", SQL: base + " LIMIT :limit"},
			{Name: "bad1", SQL: base},
			{Name: "bad2", Params: map[string]string{"d": "datetime"}, SQL: base + " AND t.created_at > :d LIMIT :limit"},
		}, []string{`audience "bad1": sql does not use :limit`, `audience "bad2": param "d" has unknown type "datetime"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auds, err := Compile(tc.defs)
			if err == nil {
				t.Fatalf("Compile succeeded, want errors %q", tc.want)
			}
			if auds != nil {
				t.Errorf("Compile returned audiences with an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
