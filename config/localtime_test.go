package config

import (
	"strings"
	"testing"
)

func TestLocalTimeSettings(t *testing.T) {
	cfg, err := Load(env(emulator))
	if err != nil || cfg.Engine.DefaultTimezone != "UTC" || cfg.Engine.QuietHours != "" {
		t.Fatalf("defaults: %q %q %v", cfg.Engine.DefaultTimezone, cfg.Engine.QuietHours, err)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_DEFAULT_TIMEZONE": "Asia/Seoul", "PUSHFAN_QUIET_HOURS": "22:00-08:00"})))
	if err != nil || cfg.Engine.DefaultTimezone != "Asia/Seoul" || cfg.Engine.QuietHours != "22:00-08:00" {
		t.Fatalf("set: %+v %v", cfg.Engine, err)
	}
	for name, bad := range map[string][]string{
		"PUSHFAN_DEFAULT_TIMEZONE": {"Asia/Seol", "Local", "+09:00"},
		"PUSHFAN_QUIET_HOURS":      {"22:00", "22:00-22:00", "10pm-8am", "22:00-24:30"},
	} {
		for _, v := range bad {
			_, err := Load(env(with(map[string]string{name: v})))
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: error %v does not name the variable", name, v, err)
			}
		}
	}
}
