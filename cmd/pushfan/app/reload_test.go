package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pushfan/audience"
	"pushfan/broadcast/rules"
	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/internal/testsupport/testdb"
)

const reloadSQL = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto ORDER BY t.id LIMIT :limit"

// reloadYAML is a config file with the given audiences' YAML, a cap and
// a job that sends to vip.
func reloadYAML(audiences string) string {
	return "frequency_caps:\n  marketing: 1/day\naudiences:\n" + audiences +
		"jobs:\n  - name: vip_digest\n    schedule: \"0 9 * * *\"\n    audience: {name: vip}\n    message: {title: hi}\n"
}

func audienceYAML(name, sql, extra string) string {
	return "  - name: " + name + "\n    sql: \"" + sql + "\"\n" + extra
}

// A reload swaps in the file's new audiences when every start-up check
// passes, and keeps the current ones, naming every problem, when one
// fails: SQL that does not run, a cap that is not configured, a job whose
// audience is gone, a file that does not parse.
func TestReloadKeepsTheOldSetOnABadFile(t *testing.T) {
	tdb := testdb.New(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pushfan.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vip := audienceYAML("vip", reloadSQL, "")
	write(reloadYAML(vip))
	env := map[string]string{"PUSHFAN_CONFIG": file, "PUSHFAN_MYSQL_DSN": tdb.DSN, "PUSHFAN_FCM_ENDPOINT": "http://127.0.0.1:1/v1", "PUSHFAN_FCM_PROJECT_ID": "test"}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	inst, err := app.New(context.Background(), cfg, tdb.SQL, log)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Sender.Close()
	sendTo := func(name string) error {
		_, err := inst.Service.Validate(rules.Spec{Title: "t", Body: "b", Audience: &rules.AudienceSpec{Name: name}})
		return err
	}
	if err := sendTo("recent"); err == nil {
		t.Fatal("an audience not yet configured was accepted")
	}

	write(reloadYAML(vip + audienceYAML("recent", reloadSQL, "    frequency_cap: marketing\n")))
	set, err := inst.Audiences.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Names(), []string{"vip", "recent"}) {
		t.Fatalf("after the reload: %v", set.Names())
	}
	if err := sendTo("recent"); err != nil {
		t.Fatalf("the reloaded audience is refused: %v", err)
	}
	if !strings.Contains(logged.String(), "named audiences reloaded") || !strings.Contains(logged.String(), "added=[recent]") {
		t.Errorf("the reload's log does not say what it added:\n%s", logged.String())
	}

	for name, tc := range map[string]struct {
		body string
		want []string // in the problems
	}{
		"SQL that does not run": {reloadYAML(vip + audienceYAML("broken", strings.Replace(reloadSQL, "device_tokens", "no_such_table", 1), "")), []string{"broken", "no_such_table"}},
		"an unknown cap":        {reloadYAML(vip + audienceYAML("capped", reloadSQL, "    frequency_cap: weekly\n")), []string{"audiences.capped.frequency_cap", "weekly"}},
		"an unknown category":   {reloadYAML(vip + audienceYAML("sorted", reloadSQL, "    category: ads\n")), []string{"audiences.sorted.category"}},
		"a job's audience gone": {reloadYAML(audienceYAML("other", reloadSQL, "")), []string{"vip_digest", "vip"}},
		"two problems at once": {reloadYAML(vip + audienceYAML("capped", reloadSQL, "    frequency_cap: weekly\n") + audienceYAML("bad", "SELECT 1", "")),
			[]string{"capped", "bad"}},
		"a file that does not parse": {"audiences: [\n", []string{"PUSHFAN_CONFIG"}},
		"an unknown key":             {reloadYAML(vip) + "no_such_setting: 1\n", []string{"no_such_setting"}},
	} {
		write(tc.body)
		set, err := inst.Audiences.Reload(context.Background())
		var failed *audience.ReloadError
		if !errors.As(err, &failed) {
			t.Errorf("%s: reloaded (%v)", name, err)
			continue
		}
		all := strings.Join(failed.Problems, "\n")
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: the problems do not name %q:\n%s", name, w, all)
			}
		}
		if !slices.Equal(set.Names(), []string{"vip", "recent"}) {
			t.Errorf("%s: the current set changed: %v", name, set.Names())
		}
		if err := sendTo("recent"); err != nil {
			t.Errorf("%s: the kept audience is refused: %v", name, err)
		}
	}
}
