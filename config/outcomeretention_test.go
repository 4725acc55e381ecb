package config

import (
	"strings"
	"testing"
	"time"
)

// PUSHFAN_OUTCOME_RETENTION keeps 30 days by default; 0 keeps no outcomes;
// a positive value below an hour is refused, naming the variable.
func TestOutcomeRetention(t *testing.T) {
	for raw, want := range map[string]time.Duration{"": 720 * time.Hour, "0": 0, "1h": time.Hour, "48h": 48 * time.Hour} {
		vars := map[string]string{}
		if raw != "" {
			vars["PUSHFAN_OUTCOME_RETENTION"] = raw
		}
		cfg, err := Load(env(with(vars)))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil || cfg.Engine.OutcomeRetention != want {
			t.Errorf("%q: %v %v, want %v", raw, cfg.Engine.OutcomeRetention, err, want)
		}
	}
	for _, raw := range []string{"30m", "-1h"} {
		cfg, err := Load(env(with(map[string]string{"PUSHFAN_OUTCOME_RETENTION": raw})))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "PUSHFAN_OUTCOME_RETENTION: must be 0 (keep none) or at least 1h") {
			t.Errorf("%q: %v, want an error naming PUSHFAN_OUTCOME_RETENTION", raw, err)
		}
	}
}
