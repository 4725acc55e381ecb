package filter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var testFields = Fields{
	FieldPlatform:      {Name: FieldPlatform, Kind: KindString, Expr: "t.platform"},
	FieldLocale:        {Name: FieldLocale, Kind: KindString, Expr: "u.locale"},
	FieldLastSeen:      {Name: FieldLastSeen, Kind: KindTime, Expr: "t.updated_at"},
	FieldAppVersion:    {Name: FieldAppVersion, Kind: KindVersion, Expr: "t.app_version"},
	FieldUserID:        {Name: FieldUserID, Kind: KindInt, Expr: "t.user_id"},
	"attributes.plan":  {Name: "attributes.plan", Kind: KindString, Expr: "u.`plan_code`"},
	"attributes.vip":   {Name: "attributes.vip", Kind: KindBool, Expr: "u.`vip`"},
	"attributes.since": {Name: "attributes.since", Kind: KindDate, Expr: "u.`since`"},
}

func pathOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Path
	}
	return ""
}

// Every mistake is an *Error naming its path in the filter.
func TestParseNamesThePathOfEveryMistake(t *testing.T) {
	deep := `{"field":"platform","op":"eq","value":"ios"}`
	for range MaxDepth + 1 {
		deep = `{"not":` + deep + `}`
	}
	many := make([]string, MaxConditions+1)
	for i := range many {
		many[i] = `{"field":"platform","op":"eq","value":"ios"}`
	}
	long := make([]string, MaxValues+1)
	for i := range long {
		long[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct{ raw, path string }{
		{``, "filter"},
		{`[]`, "filter"},
		{`{"and":[]}`, "filter.and"},
		{`{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"platform","op":"eq","value":"ios"},{"field":"platform","op":"like","value":"x"}]}`, "filter.and[2].op"},
		{`{"or":[{"field":"t.token","op":"eq","value":"x"}]}`, "filter.or[0].field"},
		{`{"field":"platform","op":"eq"}`, "filter.value"},
		{`{"field":"platform","op":"eq","value":1}`, "filter.value"},
		{`{"field":"platform","op":"eq","value":"x","extra":1}`, "filter.extra"},
		{`{"and":[{"field":"platform","op":"eq","value":"x"}],"or":[]}`, "filter"},
		{`{"field":"user_id","op":"in","value":[1,"2"]}`, "filter.value[1]"},
		{`{"field":"user_id","op":"in","value":[` + strings.Join(long, ",") + `]}`, "filter.value"},
		{`{"field":"user_id","op":"gt","value":1.5}`, "filter.value"},
		{`{"field":"last_seen","op":"within","value":"soon"}`, "filter.value"},
		{`{"field":"last_seen","op":"eq","value":"2026-01-01T00:00:00Z"}`, "filter.op"},
		{`{"field":"last_seen","op":"before","value":"yesterday"}`, "filter.value"},
		{`{"field":"app_version","op":"gt","value":"5.x"}`, "filter.value"},
		{`{"field":"attributes.vip","op":"gt","value":true}`, "filter.op"},
		{`{"field":"attributes.since","op":"eq","value":"05/12/2026"}`, "filter.value"},
		{`{"field":"platform","op":"exists","value":"yes"}`, "filter.value"},
		{deep, "filter" + strings.Repeat(".not", MaxDepth) + ".not"},
		{`{"or":[` + strings.Join(many, ",") + `]}`, fmt.Sprintf("filter.or[%d]", MaxConditions)},
	} {
		_, err := Parse([]byte(tc.raw), testFields, "filter")
		if pathOf(err) != tc.path {
			t.Errorf("%.80s: %v, want an error at %s", tc.raw, err, tc.path)
		}
	}
}

// A filter compiles to placeholders only: no value of the request is in
// the SQL, whatever it holds; not is pushed down to the conditions.
func TestCompileBindsEveryValue(t *testing.T) {
	raw := `{"and":[
		{"field":"platform","op":"in","value":["android","x' OR 1=1 -- "]},
		{"not":{"or":[{"field":"locale","op":"eq","value":"ko\"; DROP TABLE users; #"},{"field":"attributes.plan","op":"exists","value":true}]}},
		{"field":"app_version","op":"gte","value":"5.10"},
		{"field":"last_seen","op":"not_within","value":"30d"}]}`
	f, err := Parse([]byte(raw), testFields, "filter")
	if err != nil {
		t.Fatal(err)
	}
	cond, args := Compile(f)
	for _, bad := range []string{"OR 1=1", "DROP", "android", "ko", "5.10", "30"} {
		if strings.Contains(cond, bad) {
			t.Errorf("the SQL holds %q: %s", bad, cond)
		}
	}
	want := []any{"android", "x' OR 1=1 -- ", `ko"; DROP TABLE users; #`, "000005.000010.000000.000000", int64(30 * 24 * 3600)}
	if fmt.Sprint(args) != fmt.Sprint(want) {
		t.Fatalf("args %v, want %v", args, want)
	}
	if strings.Count(cond, "?") != len(args) {
		t.Fatalf("%d placeholders for %d args: %s", strings.Count(cond, "?"), len(args), cond)
	}
	if !strings.Contains(cond, "(u.locale IS NULL OR NOT (u.locale = ?))") || !strings.Contains(cond, "(t.updated_at IS NULL OR NOT (t.updated_at >= NOW(6) - INTERVAL ? SECOND))") {
		t.Fatalf("negations: %s", cond)
	}
}

// Versions compare as versions, not as text.
func TestVersionKeysSortAsVersions(t *testing.T) {
	in := []string{"5.9.2", "5.10.0", "5.10", "10", "0.0.1", "5.9.10"}
	keys := map[string]string{}
	for _, v := range in {
		k, err := VersionKey(v)
		if err != nil {
			t.Fatal(err)
		}
		keys[v] = k
	}
	for _, p := range [][2]string{{"5.9.2", "5.10.0"}, {"5.9.2", "5.9.10"}, {"5.10.0", "10"}, {"0.0.1", "5.9.2"}} {
		if keys[p[0]] >= keys[p[1]] {
			t.Errorf("%s sorts at or after %s", p[0], p[1])
		}
	}
	if keys["5.10"] != keys["5.10.0"] {
		t.Errorf("5.10 and 5.10.0 differ")
	}
	for _, bad := range []string{"", "5.x", "1.2.3.4.5", "-1", "1..2", "1234567"} {
		if _, err := VersionKey(bad); err == nil {
			t.Errorf("%q is a version", bad)
		}
	}
}

// Match is the filter's meaning in Go: a NULL value satisfies no
// positive condition and every negative one.
func TestMatchNullsAndNegations(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	f, err := Parse([]byte(`{"or":[{"field":"platform","op":"ne","value":"ios"},{"field":"last_seen","op":"within","value":"7d"}]}`), testFields, "filter")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		row  Row
		want bool
	}{
		{Row{}, true}, // platform unknown: not ios
		{Row{"platform": "ios"}, false},
		{Row{"platform": "ios", "last_seen": now.Add(-24 * time.Hour)}, true},
		{Row{"platform": "ios", "last_seen": now.Add(-8 * 24 * time.Hour)}, false},
	} {
		if got := Match(f, tc.row, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.row, got, tc.want)
		}
	}
	v, _ := Parse([]byte(`{"field":"app_version","op":"gt","value":"5.9.2"}`), testFields, "filter")
	if !Match(v, Row{"app_version": "5.10.0"}, now) || Match(v, Row{"app_version": "5.9.2"}, now) || Match(v, Row{}, now) {
		t.Error("version comparison")
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute} {
		if d, err := ParseDuration(s); err != nil || d != want {
			t.Errorf("%s: %v %v", s, d, err)
		}
	}
	for _, s := range []string{"", "0d", "-1h", "d", "99999d", "1y"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

// Every op a kind lists (Ops, what a console offers) parses on a field of
// that kind with a value of the right shape.
func TestEveryListedOpParses(t *testing.T) {
	values := map[string]string{"exists": "true", "in": `["x"]`, "nin": `["x"]`, "within": `"7d"`, "not_within": `"7d"`}
	byKind := map[Kind]string{KindString: `"x"`, KindInt: "1", KindBool: "true", KindDate: `"2026-12-05"`, KindTime: `"2026-12-05T00:00:00Z"`, KindVersion: `"5.10"`}
	fields := map[Kind]string{KindString: "platform", KindInt: "user_id", KindBool: "attributes.vip", KindDate: "attributes.since", KindTime: "last_seen", KindVersion: "app_version"}
	for kind, field := range fields {
		for _, op := range Ops(kind) {
			v, ok := values[op]
			if !ok {
				v = byKind[kind]
			}
			if (op == "in" || op == "nin") && kind != KindString {
				v = "[" + byKind[kind] + "]"
			}
			raw := `{"field":"` + field + `","op":"` + op + `","value":` + v + `}`
			if _, err := Parse([]byte(raw), testFields, "filter"); err != nil {
				t.Errorf("%s: %v", raw, err)
			}
		}
	}
}
