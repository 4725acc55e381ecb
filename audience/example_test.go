package audience

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// exampleConfig is the part of PUSHFAN_CONFIG this test reads from
// testdata/example.yaml: the audiences, and the jobs' audience choice and
// message (the cron package owns the rest of a job).
type exampleConfig struct {
	Audiences []Definition `yaml:"audiences"`
	Jobs      []struct {
		Name     string `yaml:"name"`
		Audience struct {
			Name   string         `yaml:"name"`
			Params map[string]any `yaml:"params"`
		} `yaml:"audience"`
		Message struct {
			Title string            `yaml:"title"`
			Body  string            `yaml:"body"`
			Data  map[string]string `yaml:"data"`
		} `yaml:"message"`
	} `yaml:"jobs"`
}

func TestExampleConfig(t *testing.T) {
	raw, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg exampleConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	// Decoded strictly (as config.Load does), no key of an audience is unknown.
	var strict struct {
		Audiences []Definition `yaml:"audiences"`
		Jobs      any          `yaml:"jobs"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&strict); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	if len(strict.Audiences) != 1 || strict.Audiences[0].Name != "renewal_due" || len(strict.Audiences[0].Params) != 2 {
		t.Fatalf("audiences = %+v", strict.Audiences)
	}

	auds, err := Compile(cfg.Audiences)
	if err != nil {
		t.Fatal(err)
	}
	_, db, _ := newDB(t)
	ctx := context.Background()
	seedRenewals(t, db, 60)
	byName := map[string]*Audience{}
	for _, a := range auds {
		if err := a.Check(ctx, db); err != nil {
			t.Fatal(err)
		}
		byName[a.Name()] = a
	}
	if len(cfg.Jobs) != 2 {
		t.Fatalf("%d jobs, want 2 (1 and 3 days before)", len(cfg.Jobs))
	}
	for _, job := range cfg.Jobs {
		a := byName[job.Audience.Name]
		if a == nil {
			t.Fatalf("job %s: unknown audience %q", job.Name, job.Audience.Name)
		}
		// YAML decodes 3 as int: Bind takes Go integers as well as JSON's float64.
		b, err := a.Bind(job.Audience.Params)
		if err != nil {
			t.Fatalf("job %s: %v", job.Name, err)
		}
		tmpl, err := ParseTemplate(job.Message.Title, job.Message.Body, job.Message.Data, a.Vars())
		if err != nil {
			t.Fatalf("job %s: %v", job.Name, err)
		}
		if tmpl.IsStatic() {
			t.Errorf("job %s: template is static", job.Name)
		}
		rows, err := b.Page(ctx, db, 0, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Fatalf("job %s: the demo data selects nobody", job.Name)
		}
		for _, r := range rows {
			title, body, data, err := tmpl.Render(r.Vars)
			if err != nil {
				t.Fatalf("job %s, token %d: %v", job.Name, r.Cursor, err)
			}
			if !strings.Contains(title, r.Vars["plan"]) || !strings.Contains(title+body, r.Vars["renews_on"]) ||
				!strings.Contains(body, r.Vars["amount"]) || data["plan"] != r.Vars["plan"] || data["screen"] != "subscription" {
				t.Errorf("job %s: rendered %q / %q / %v for %v", job.Name, title, body, data, r.Vars)
			}
		}
		t.Logf("job %s: %d recipients; first: %v", job.Name, len(rows), rows[0].Vars)
	}

	// The example's title, with a template over the renewal columns.
	tmpl, err := ParseTemplate("Your {{.plan}} plan renews on {{.renews_on}}", "", nil, byName["renewal_due"].Vars())
	if err != nil {
		t.Fatal(err)
	}
	title, _, _, err := tmpl.Render(map[string]string{"plan": "pro", "amount": "9.90", "renews_on": "2030-01-31"})
	if err != nil || title != "Your pro plan renews on 2030-01-31" {
		t.Errorf("title = %q, %v", title, err)
	}
}
