package audience

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
)

var renewalVars = []string{"plan", "amount", "renews_on"}

func TestTemplateStatic(t *testing.T) {
	tests := []struct {
		title, body string
		data        map[string]string
		static      bool
		wantTitle   string
	}{
		{"Hello", "World", map[string]string{"k": "v"}, true, "Hello"},
		{"", "", nil, true, ""},
		{"Hi {{/* a comment */}}there", "b", nil, true, "Hi there"},
		{"Hi   {{- /* trimmed */ -}}   there", "b", nil, true, "Hithere"},
		{"{{.plan}}", "b", nil, false, ""},
		{"t", "{{if true}}x{{end}}", nil, false, ""},
		{"t", "b", map[string]string{"a": "static", "z": "{{.plan}}"}, false, ""},
		{"t", `{{"literal"}}`, nil, false, ""},
	}
	for _, tc := range tests {
		tmpl, err := ParseTemplate(tc.title, tc.body, tc.data, renewalVars)
		if err != nil {
			t.Fatalf("ParseTemplate(%q, %q, %v): %v", tc.title, tc.body, tc.data, err)
		}
		if tmpl.IsStatic() != tc.static {
			t.Errorf("IsStatic(%q, %q, %v) = %v, want %v", tc.title, tc.body, tc.data, tmpl.IsStatic(), tc.static)
		}
		if tc.static {
			title, body, data, err := tmpl.Render(nil)
			if err != nil {
				t.Fatal(err)
			}
			if title != tc.wantTitle || body != tc.body || !maps.Equal(data, tc.data) {
				t.Errorf("static Render = %q %q %v", title, body, data)
			}
		}
	}
}

func TestTemplateRender(t *testing.T) {
	tmpl, err := ParseTemplate(
		"Your {{.plan}} plan renews on {{.renews_on}}",
		`{{.amount}} will be charged{{if eq .plan "pro"}} (pro){{end}}. {{$.plan | printf "%.1s"}}`,
		map[string]string{"screen": "subscription", "plan": "{{.plan}}"},
		renewalVars)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.IsStatic() {
		t.Fatal("IsStatic = true")
	}
	if got := slices.Clone(tmpl.variables); !slices.Equal(got, []string{"amount", "plan", "renews_on"}) {
		t.Errorf("Variables = %q", got)
	}
	vars := map[string]string{"plan": "pro", "amount": "19.90", "renews_on": "2030-01-31", "unused": "x"}
	title, body, data, err := tmpl.Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	if title != "Your pro plan renews on 2030-01-31" {
		t.Errorf("title = %q", title)
	}
	if body != "19.90 will be charged (pro). p" {
		t.Errorf("body = %q", body)
	}
	if want := map[string]string{"screen": "subscription", "plan": "pro"}; !maps.Equal(data, want) {
		t.Errorf("data = %v, want %v", data, want)
	}
	// A fresh data map every call.
	data["plan"] = "changed"
	if _, _, again, _ := tmpl.Render(vars); again["plan"] != "pro" {
		t.Error("Render returned a shared data map")
	}

	// Safe for concurrent use (run with -race).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := map[string]string{"plan": strings.Repeat("p", i+1), "amount": "1", "renews_on": "d"}
			for range 100 {
				title, _, data, err := tmpl.Render(v)
				if err != nil || title != "Your "+v["plan"]+" plan renews on d" || data["plan"] != v["plan"] {
					t.Errorf("concurrent Render = %q %v %v", title, data, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestTemplateMissingKeyNamesField(t *testing.T) {
	tmpl, err := ParseTemplate("Hi", "b", map[string]string{"a": "x", "renewal": "on {{.renews_on}}"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = tmpl.Render(map[string]string{"plan": "pro"})
	var te *TemplateError
	if !errors.As(err, &te) || te.Field != "data.renewal" {
		t.Fatalf("Render = %v, want a *TemplateError for data.renewal", err)
	}
	if !strings.HasPrefix(err.Error(), "data.renewal: ") || !strings.Contains(err.Error(), `"renews_on"`) {
		t.Errorf("error %q does not name the field and the key", err)
	}
	// nil vars: the same error, not a panic.
	if _, _, _, err := tmpl.Render(nil); !errors.As(err, &te) || te.Field != "data.renewal" {
		t.Errorf("Render(nil) = %v", err)
	}
	// An execution error other than a missing key names its field too.
	tmpl, err = ParseTemplate(`{{index .plan 10}}`, "b", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := tmpl.Render(map[string]string{"plan": "pro"}); !errors.As(err, &te) || te.Field != "title" {
		t.Errorf("Render = %v, want a *TemplateError for title", err)
	}
}

func TestTemplateParseErrors(t *testing.T) {
	tests := []struct {
		name        string
		title, body string
		data        map[string]string
		vars        []string
		want        []string // substrings, each a separate problem
		field, vari string   // the first TemplateError
	}{
		{"does not parse", "Hi {{.plan", "b", nil, nil, []string{"title: template: title:1: unclosed action"}, "title", ""},
		{"unknown function", "t", "{{upper .plan}}", nil, nil, []string{`body: template: body:1: function "upper" not defined`}, "body", ""},
		{"data value", "t", "b", map[string]string{"k": "{{end}}"}, nil, []string{"data.k: template: data.k:1: unexpected {{end}}"}, "data.k", ""},
		{"unknown variable", "Your {{.plna}} plan", "b", nil, renewalVars,
			[]string{`title: unknown variable "plna" (the audience has: plan, amount, renews_on)`}, "title", "plna"},
		{"unknown variable deep inside", "t", `{{if .plan}}{{range $i, $c := .x}}{{$.y}}{{end}}{{end}}`, nil, renewalVars,
			[]string{`body: unknown variable "x"`, `body: unknown variable "y"`}, "body", "x"},
		{"unknown variable in data", "t", "b", map[string]string{"a": "{{with .amount}}{{.}}{{end}}", "b": "{{.nope}}"}, renewalVars,
			[]string{`data.b: unknown variable "nope"`}, "data.b", "nope"},
		{"built-in audience has no variables", "Hi {{.name}}", "b", nil, []string{},
			[]string{`title: unknown variable "name": this audience has no variables`}, "title", "name"},
		{"undefined template", `{{template "x"}}`, "b", nil, nil, []string{`title: calls undefined template "x"`}, "title", ""},
		{"every field reported", "{{.a}}", "{{", map[string]string{"k": "{{.b}}"}, renewalVars,
			[]string{`title: unknown variable "a"`, "body: template: body:1: unclosed action", `data.k: unknown variable "b"`}, "title", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.title, tc.body, tc.data, tc.vars)
			if err == nil {
				t.Fatalf("ParseTemplate succeeded (static=%v)", tmpl.IsStatic())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			var te *TemplateError
			if !errors.As(err, &te) || te.Field != tc.field || te.Variable != tc.vari {
				t.Errorf("first TemplateError = %+v, want field %q variable %q", te, tc.field, tc.vari)
			}
		})
	}

	// Known variables, a local variable and a defined template are fine.
	if _, err := ParseTemplate(`{{define "p"}}[{{.}}]{{end}}{{template "p" .plan}}`, `{{$p := .plan}}{{$p}}`, nil, renewalVars); err != nil {
		t.Errorf("valid templates: %v", err)
	}
}
