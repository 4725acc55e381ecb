package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The default is today's schedule, step for step; a value is split at
// commas with the spaces around each step trimmed; 20 steps of up to 24h
// are within the bounds.
func TestParseRetrySchedule(t *testing.T) {
	got, err := ParseRetrySchedule(Defaults().WebhookRetrySchedule)
	want := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the default: %v (%v), want %v", got, err, want)
	}
	got, err = ParseRetrySchedule(" 2s, 1m30s ,24h ")
	if want := []time.Duration{2 * time.Second, 90 * time.Second, 24 * time.Hour}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("2s, 1m30s ,24h: %v (%v), want %v", got, err, want)
	}
	twenty := strings.Repeat("1s,", 19) + "2s"
	if got, err := ParseRetrySchedule(twenty); err != nil || len(got) != 20 || got[19] != 2*time.Second {
		t.Fatalf("20 steps: %v (%v)", got, err)
	}
}

// Each bad schedule stops start-up with one error, which names the
// variable and the problem.
func TestRetryScheduleIsValidated(t *testing.T) {
	const name = "PUSHFAN_WEBHOOK_RETRY_SCHEDULE: "
	for value, want := range map[string]string{
		" ":                              name + "is empty: list at least one duration, e.g. 5s,30s,2m",
		"5s,0s":                          name + `step 2, "0s", must be a positive duration`,
		"-5s":                            name + `step 1, "-5s", must be a positive duration`,
		"5s,24h0m1s":                     name + `step 2, "24h0m1s", must be at most 24h (an event is retried for a day)`,
		"5s,soon":                        name + `step 2, "soon", is not a duration such as 30s or 2m: time: invalid duration "soon"`,
		"5s,,30s":                        name + `step 2, "", is not a duration such as 30s or 2m: time: invalid duration ""`,
		"30":                             name + `step 1, "30", is not a duration such as 30s or 2m: time: missing unit in duration "30"`,
		strings.Repeat("1s,", 20) + "1s": name + "has 21 steps, more than 20 (the last step repeats: a long tail needs no more)",
	} {
		_, err := Load(env(with(map[string]string{"PUSHFAN_WEBHOOK_RETRY_SCHEDULE": value})))
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", value, err, want)
		}
	}
	// An empty value in the file is refused too (in the environment it
	// means the default).
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte("webhook_retry_schedule: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path}))); err == nil || !strings.Contains(err.Error(), name+"is empty") {
		t.Fatalf("an empty webhook_retry_schedule in the file: %v", err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_WEBHOOK_RETRY_SCHEDULE": ""})))
	if err != nil || cfg.WebhookRetrySchedule != "5s,30s,2m,10m,30m,1h" {
		t.Fatalf("an empty variable: %q (%v), want the default", cfg.WebhookRetrySchedule, err)
	}
}

// The file sets it, the environment wins, and config check prints it.
func TestRetryScheduleFromTheFileAndTheEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte("webhook_retry_schedule: 1s,2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path})))
	if err != nil || cfg.WebhookRetrySchedule != "1s,2s" {
		t.Fatalf("from the file: %q (%v)", cfg.WebhookRetrySchedule, err)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_CONFIG": path, "PUSHFAN_WEBHOOK_RETRY_SCHEDULE": "2s,5s,10s"})))
	if err != nil || cfg.WebhookRetrySchedule != "2s,5s,10s" {
		t.Fatalf("the environment over the file: %q (%v)", cfg.WebhookRetrySchedule, err)
	}
	want := Setting{Name: "PUSHFAN_WEBHOOK_RETRY_SCHEDULE", Value: "2s,5s,10s"}
	if !slices.Contains(cfg.Effective(), want) {
		t.Fatalf("config check does not print %+v", want)
	}
}
