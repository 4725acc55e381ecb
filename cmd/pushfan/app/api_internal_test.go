package app

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/server"
)

// apiConfig takes the API's settings from the configuration: the parsed
// admin tokens (none when one does not parse, as before), the timeouts
// and the limits.
func TestAPIConfigIsTheConfigurations(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Defaults()
	cfg.HTTPAddr, cfg.MetricsAddr, cfg.MetricsToken, cfg.InternalToken = ":9000", ":9001", "metrics-token-0123456789", "internal-token-0123456789"
	cfg.AdminTokens = []string{"ops:viewer:viewer-secret-0123456789:consumer|partner", "sender-secret-0123456789"}
	cfg.HTTP.WaitTimeout, cfg.DB.Timeout, cfg.HTTP.BodyLimit = 7*time.Second, 3*time.Second, 12345
	cfg.Events.PerAddress, cfg.Events.Origins = 2.5, []string{"https://app.example"}
	got := apiConfig(cfg, log)
	if got.Addr != ":9000" || got.MetricsAddr != ":9001" || got.Tokens.Metrics != cfg.MetricsToken || got.Tokens.Internal != cfg.InternalToken {
		t.Errorf("addresses and tokens: %+v", got)
	}
	if len(got.Tokens.Admin) != 2 || got.Tokens.Admin[0].Name != "ops" || got.Tokens.Admin[0].Role != server.RoleViewer ||
		!slices.Equal(got.Tokens.Admin[0].Apps, []string{"consumer", "partner"}) || got.Tokens.Admin[1].Role != server.RoleAdmin || got.Tokens.Admin[1].Apps != nil {
		t.Errorf("admin tokens: %+v", got.Tokens.Admin)
	}
	if got.Timeouts.Wait != 7*time.Second || got.Timeouts.DB != 3*time.Second || got.Timeouts.Shutdown != cfg.HTTP.ShutdownTimeout ||
		got.Timeouts.Read != cfg.HTTP.ReadTimeout || got.SessionTTL != cfg.HTTP.SessionTTL {
		t.Errorf("timeouts: %+v", got.Timeouts)
	}
	if got.Limits.Body != 12345 || got.Limits.EventsPerAddress != 2.5 || got.Limits.SubmitsPerMinute != cfg.HTTP.SubmitPerMinute ||
		!slices.Equal(got.EventOrigins, cfg.Events.Origins) {
		t.Errorf("limits: %+v", got.Limits)
	}
	if got.DisableTokenSignIn {
		t.Error("token sign-in is off by default")
	}
	cfg.HTTP.TokenSignIn = false
	if got := apiConfig(cfg, log); !got.DisableTokenSignIn {
		t.Error("PUSHFAN_TOKEN_SIGNIN=false left the token sign-in on")
	}
	cfg.AdminTokens = []string{"short"}
	if got := apiConfig(cfg, log); got.Tokens.Admin != nil {
		t.Errorf("an admin token that does not parse: %+v, want none", got.Tokens.Admin)
	}
}

// The named audiences' apps resolve as the configuration does: their
// own, or the only app.
func TestAPIDomainResolvesApps(t *testing.T) {
	cfg := config.Defaults()
	cfg.Audiences = []config.Audience{{Name: "vip", SQL: "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit", FrequencyCap: "off"}}
	compiled, err := audience.Compile(cfg.AllAudiences())
	if err != nil {
		t.Fatal(err)
	}
	catalog := audience.NewCatalog(audience.NewSet(compiled, cfg.AllAudiences(), cfg.AppOf, time.Now()))
	d := apiDomain(cfg, nil, nil, nil, nil, nil, nil, &Reloader{catalog: catalog}, nil)
	if d.Apps.Default != "default" || len(d.Apps.List) != 1 || d.Apps.List[0].Name != "default" {
		t.Errorf("apps: %+v", d.Apps)
	}
	if l := d.Audiences.Load().List(); len(l) != 1 || l[0].App != "default" || l[0].FrequencyCap != "off" {
		t.Errorf("audiences: %+v", l)
	}
}
