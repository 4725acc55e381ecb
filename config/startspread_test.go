package config

import (
	"strings"
	"testing"
	"time"
)

func TestStartSpreadDefaultZeroAndBounds(t *testing.T) {
	cfg, err := Load(env(emulator))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.StartSpread != 5*time.Second {
		t.Fatalf("default start spread %v, want 5s", cfg.Engine.StartSpread)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_START_SPREAD": "0"})))
	if err != nil || cfg.Engine.StartSpread != 0 {
		t.Fatalf("0 must disable the spread: %v %v", cfg.Engine.StartSpread, err)
	}
	for _, v := range []string{"-1s", "11m", "soon"} {
		_, err := Load(env(with(map[string]string{"PUSHFAN_START_SPREAD": v})))
		if err == nil || !strings.Contains(err.Error(), "PUSHFAN_START_SPREAD") {
			t.Errorf("PUSHFAN_START_SPREAD=%s: error %v does not name the variable", v, err)
		}
	}
}
