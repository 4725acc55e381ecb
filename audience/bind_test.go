package audience

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

func typedAudience(t *testing.T) *Audience {
	t.Helper()
	auds, err := Compile([]Definition{{
		Name:   "typed",
		Params: map[string]string{"n": TypeInt, "s": TypeString, "b": TypeBool, "d": TypeDate},
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after " +
			"AND :n >= 0 AND :s = :s AND :b = :b AND :d = :d ORDER BY t.id LIMIT :limit",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return auds[0]
}

func TestBind(t *testing.T) {
	a := typedAudience(t)
	b, err := a.Bind(map[string]any{"n": 3.0, "s": "x' OR '1'='1", "b": true, "d": "2024-02-29"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(3), "s": "x' OR '1'='1", "b": true, "d": "2024-02-29"}
	if !maps.Equal(b.Params(), want) {
		t.Errorf("Params = %#v, want %#v", b.Params(), want)
	}
	if b.Audience() != a {
		t.Error("Audience() is not the bound audience")
	}
	if got := a.args(b.values, 7, math.MaxUint64, 100); !slices.Equal(got, []any{uint64(7), int64(3), "x' OR '1'='1", "x' OR '1'='1", true, true, "2024-02-29", "2024-02-29", int64(100)}) {
		t.Errorf("args = %#v", got)
	}

	// Other accepted encodings of an int.
	for _, n := range []any{json.Number("42"), json.Number("42.0"), 42, int64(42), uint8(42), float64(-42)} {
		if _, err := a.Bind(map[string]any{"n": n, "s": "", "b": false, "d": "1999-12-31"}); err != nil {
			t.Errorf("int %#v: %v", n, err)
		}
	}
}

func TestBindErrors(t *testing.T) {
	a := typedAudience(t)
	tests := []struct {
		name   string
		params map[string]any
		want   []ParamProblem
	}{
		{"all missing", nil, []ParamProblem{
			{"b", "missing (want bool)"}, {"d", "missing (want date)"}, {"n", "missing (want int)"}, {"s", "missing (want string)"}}},
		{"unknown", map[string]any{"n": 1.0, "s": "", "b": true, "d": "2024-01-01", "extra": 1.0, "after": 5.0},
			[]ParamProblem{{"after", "unknown parameter for this audience"}, {"extra", "unknown parameter for this audience"}}},
		{"wrong types", map[string]any{"n": "3", "s": 3.0, "b": "true", "d": 20240101.0}, []ParamProblem{
			{"b", `want bool, got string "true"`}, {"d", "want date, got number 20240101"},
			{"n", `want int, got string "3"`}, {"s", "want string, got number 3"}}},
		{"fractional int", map[string]any{"n": 3.5, "s": "", "b": true, "d": "2024-01-01"},
			[]ParamProblem{{"n", "want int, got number 3.5"}}},
		{"int beyond 2^53 as float64", map[string]any{"n": 1e17, "s": "", "b": true, "d": "2024-01-01"},
			[]ParamProblem{{"n", "want int, got number 100000000000000000"}}},
		{"null", map[string]any{"n": nil, "s": "", "b": true, "d": "2024-01-01"},
			[]ParamProblem{{"n", "want int, got null"}}},
		{"bad dates", map[string]any{"n": 1.0, "s": "", "b": true, "d": "2023-02-29"},
			[]ParamProblem{{"d", `want a date YYYY-MM-DD, got "2023-02-29"`}}},
		{"date with time", map[string]any{"n": 1.0, "s": "", "b": true, "d": "2024-01-01T00:00:00Z"},
			[]ParamProblem{{"d", `want a date YYYY-MM-DD, got "2024-01-01T00:00:00Z"`}}},
		{"date without padding", map[string]any{"n": 1.0, "s": "", "b": true, "d": "2024-1-1"},
			[]ParamProblem{{"d", `want a date YYYY-MM-DD, got "2024-1-1"`}}},
		{"mixed", map[string]any{"n": 2.5, "b": true, "d": "tomorrow", "x": "y"}, []ParamProblem{
			{"d", `want a date YYYY-MM-DD, got "tomorrow"`}, {"n", "want int, got number 2.5"},
			{"s", "missing (want string)"}, {"x", "unknown parameter for this audience"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Bind(tc.params)
			var pe *ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("Bind = %v, want a *ParamError", err)
			}
			if pe.Audience != "typed" {
				t.Errorf("Audience = %q", pe.Audience)
			}
			if !slices.Equal(pe.Problems, tc.want) {
				t.Errorf("Problems =\n%q\nwant\n%q", pe.Problems, tc.want)
			}
			for _, p := range tc.want {
				if !strings.Contains(err.Error(), p.Param+": ") || !slices.Contains(pe.Params(), p.Param) {
					t.Errorf("error %q does not name %q", err, p.Param)
				}
			}
		})
	}
}

func TestParamsJSONRoundTrip(t *testing.T) {
	a := typedAudience(t)
	b, err := a.Bind(map[string]any{"n": json.Number("9007199254740993"), "s": "héllo \"q\"", "b": false, "d": "2030-01-31"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.ParamsJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":false,"d":"2030-01-31","n":9007199254740993,"s":"héllo \"q\""}`; string(raw) != want {
		t.Errorf("ParamsJSON = %s, want %s", raw, want)
	}
	b2, err := a.BindJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(b.Params(), b2.Params()) {
		t.Errorf("round trip: %#v != %#v", b2.Params(), b.Params())
	}

	// BindJSON reports parameter problems like Bind, and refuses non-objects.
	var pe *ParamError
	if _, err := a.BindJSON([]byte(`{"n":"1"}`)); !errors.As(err, &pe) || len(pe.Problems) != 4 {
		t.Errorf("BindJSON bad params = %v", err)
	}
	if _, err := a.BindJSON([]byte(`[1]`)); err == nil || errors.As(err, &pe) {
		t.Errorf("BindJSON array = %v, want a plain error", err)
	}
	if _, err := a.BindJSON([]byte(`{} {}`)); err == nil {
		t.Error("BindJSON with trailing data succeeded")
	}

	// No params: {} and back, from empty input or null too.
	auds, err := Compile([]Definition{{Name: "np", SQL: "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"", "null", "{}", " {} "} {
		nb, err := auds[0].BindJSON([]byte(in))
		if err != nil {
			t.Fatalf("BindJSON(%q): %v", in, err)
		}
		if raw, _ := nb.ParamsJSON(); string(raw) != "{}" {
			t.Errorf("ParamsJSON = %s, want {}", raw)
		}
	}
	if _, err := (Bound{}).ParamsJSON(); err == nil {
		t.Error("ParamsJSON of the zero Bound succeeded")
	}
}
