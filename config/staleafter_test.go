package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PUSHFAN_STALE_AFTER is off by default, takes days or Go durations from
// the environment and engine.stale_after from the YAML, and a bad value
// is refused naming the variable and the bounds.
func TestStaleAfter(t *testing.T) {
	cfg, err := Load(env(emulator))
	if err != nil || cfg.Engine.StaleAfter != 0 {
		t.Fatalf("default: %v %v, want off (0)", cfg.Engine.StaleAfter, err)
	}
	for raw, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "720h": 720 * time.Hour, "270d": 270 * 24 * time.Hour, "0": 0, "0d": 0} {
		cfg, err := Load(env(with(map[string]string{"PUSHFAN_STALE_AFTER": raw})))
		if err != nil || cfg.Engine.StaleAfter != want {
			t.Errorf("%q: %v %v, want %v", raw, cfg.Engine.StaleAfter, err, want)
		}
	}
	for raw, why := range map[string]string{
		"month": `"month" is not a duration (use e.g. 30d or 720h)`,
		"-3d":   `"-3d" is not a duration`,
		"1h":    "must be 0 (off) or between 1 day (24h) and 270 days (6480h), got 1h0m0s",
		"271d":  "must be 0 (off) or between 1 day",
		"-24h":  "must be 0 (off) or between 1 day",
	} {
		_, err := Load(env(with(map[string]string{"PUSHFAN_STALE_AFTER": raw})))
		if err == nil || !strings.Contains(err.Error(), "PUSHFAN_STALE_AFTER: ") || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error naming PUSHFAN_STALE_AFTER saying %q", raw, err, why)
		}
	}
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte("engine:\n  stale_after: 1440h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_CONFIG": path})))
	if err != nil || cfg.Engine.StaleAfter != 60*24*time.Hour {
		t.Fatalf("yaml engine.stale_after: %v %v, want 1440h", cfg.Engine.StaleAfter, err)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_CONFIG": path, "PUSHFAN_STALE_AFTER": "30d"})))
	if err != nil || cfg.Engine.StaleAfter != 30*24*time.Hour {
		t.Fatalf("the environment wins: %v %v, want 720h", cfg.Engine.StaleAfter, err)
	}
}
