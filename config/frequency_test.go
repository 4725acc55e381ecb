package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFrequencyCaps(t *testing.T) {
	got, err := ParseFrequencyCaps(" 1/2h , 3/day ")
	if err != nil {
		t.Fatal(err)
	}
	want := []FrequencyCap{{Max: 1, Per: 2 * time.Hour}, {Max: 3, Day: true}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] || FormatFrequencyCaps(got) != "1/2h0m0s,3/day" {
		t.Fatalf("got %+v (%s), want %+v", got, FormatFrequencyCaps(got), want)
	}
	if caps, err := ParseFrequencyCaps(""); err != nil || caps != nil {
		t.Fatalf("empty: %v %v, want no cap", caps, err)
	}
	for spec, why := range map[string]string{
		"3":           "count/window",
		"0/day":       "from 1 to",
		"x/day":       "from 1 to",
		"1/week":      "day or a duration",
		"1/30s":       "between",
		"1/2h,2/2h":   "same window",
		"1/day,2/day": "same window",
	} {
		if _, err := ParseFrequencyCaps(spec); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", spec, err, why)
		}
	}
}

// The environment's cap and the YAML's named ones are checked at start,
// each error naming its variable or key, and so is every audience's and
// job's reference to a named cap.
func TestFrequencyCapsAreValidated(t *testing.T) {
	if _, err := Load(env(with(map[string]string{"PUSHFAN_FREQUENCY_CAP": "3/fortnight"}))); err == nil || !strings.Contains(err.Error(), "PUSHFAN_FREQUENCY_CAP") {
		t.Fatalf("bad PUSHFAN_FREQUENCY_CAP: %v", err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_FREQUENCY_CAP": "1/2h,3/day"})))
	if err != nil || cfg.Engine.FrequencyCap != "1/2h,3/day" {
		t.Fatalf("%q %v", cfg.Engine.FrequencyCap, err)
	}
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	yaml := `frequency_caps:
  marketing: "1/day"
  broken: "1/fortnight"
audiences:
  - name: lapsed
    sql: "SELECT 1"
    frequency_cap: nosuch
jobs:
  - name: digest
    schedule: "0 9 * * *"
    audience: {all: true}
    message: {title: x}
    frequency_cap: marketing
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(env(with(map[string]string{"PUSHFAN_CONFIG": path})))
	if err == nil || !strings.Contains(err.Error(), "frequency_caps.broken") || !strings.Contains(err.Error(), "audiences.lapsed.frequency_cap") ||
		strings.Contains(err.Error(), "jobs.digest") {
		t.Fatalf("got %v; want frequency_caps.broken and audiences.lapsed.frequency_cap named, the job's valid cap not", err)
	}
}
