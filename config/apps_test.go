package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pushfan/model"
)

func loadAppsYAML(t *testing.T, yaml string, extra map[string]string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	m := with(extra)
	m["PUSHFAN_CONFIG"] = path
	return Load(env(m))
}

// Without apps:, the environment's FCM settings are one app, "default".
func TestTheEnvironmentIsTheDefaultApp(t *testing.T) {
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_RATE_LIMIT": "500"})))
	if err != nil {
		t.Fatal(err)
	}
	want := []App{{Name: model.DefaultApp, ProjectID: "demo", Endpoint: "http://127.0.0.1:9099/v1", RateLimit: 500}}
	if got := cfg.AppList(); !reflect.DeepEqual(got, want) {
		t.Fatalf("apps %+v, want %+v", got, want)
	}
}

func TestAppsTakeTheirDefaultsFromTheEnvironment(t *testing.T) {
	cfg, err := loadAppsYAML(t, `apps:
  - {name: consumer, project_id: acme-consumer}
  - {name: partner, project_id: acme-partner, endpoint: "http://127.0.0.1:9100/v1", rate_limit: 2000}
audiences:
  - {name: vip, app: partner, sql: "SELECT 1"}
jobs: []
`, map[string]string{"PUSHFAN_RATE_LIMIT": "9000"})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.AppList()
	if len(got) != 2 || got[0].Endpoint != "http://127.0.0.1:9099/v1" || got[0].RateLimit != 9000 ||
		got[1].Endpoint != "http://127.0.0.1:9100/v1" || got[1].RateLimit != 2000 {
		t.Fatalf("apps %+v", got)
	}
	if cfg.AppOf("") != "" || cfg.AppOf("partner") != "partner" {
		t.Fatalf("AppOf: %q %q", cfg.AppOf(""), cfg.AppOf("partner"))
	}
}

func TestAppsAreValidated(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"apps:\n  - {name: Consumer, project_id: a}\n", "apps[0].name"},
		{"apps:\n  - {name: a, project_id: p}\n  - {name: a, project_id: q}\n", `"a" names two apps`},
		{"apps:\n  - {name: a}\n", "apps.a.project_id: required"},
		{"apps:\n  - {name: a, project_id: p}\n  - {name: b, project_id: p}\n", "apps.b.project_id"},
		{"apps:\n  - {name: a, project_id: p, endpoint: \"ftp://x\"}\n", "apps.a.endpoint"},
		{"apps:\n  - {name: a, project_id: p, credentials: /nonexistent/sa.json}\n", "apps.a.credentials: cannot read"},
		{"apps:\n  - {name: a, project_id: p}\n  - {name: b, project_id: q}\naudiences:\n  - {name: vip, sql: \"SELECT 1\"}\n", "audiences vip.app: required"},
		{"apps:\n  - {name: a, project_id: p}\njobs:\n  - {name: j, app: nope, schedule: \"@daily\", audience: {all: true}, message: {title: t}}\n", `jobs j.app: "nope" is not a configured app`},
	} {
		_, err := loadAppsYAML(t, c.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

func TestAdminTokensLimitedToApps(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	ts, err := ParseAdminTokens([]string{"ops:sender:long-enough-secret-0123:consumer|partner", "ci:viewer:sha256:" + hash + ":partner",
		"all:sender:long-enough-secret-4567", "colon:sender:secret:with:Colons-0123"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ts[0].Apps, []string{"consumer", "partner"}) || !reflect.DeepEqual(ts[1].Apps, []string{"partner"}) || ts[1].Hash[0] != 0xab ||
		ts[2].Apps != nil || ts[3].Apps != nil {
		t.Fatalf("parsed %+v", ts)
	}
	// A token naming an app that is not configured stops start-up.
	_, err = Load(env(with(map[string]string{"PUSHFAN_ADMIN_TOKENS": "ops:sender:long-enough-secret-0123:nope"})))
	if err == nil || !strings.Contains(err.Error(), `token ops names app "nope"`) {
		t.Fatalf("got %v", err)
	}
}
