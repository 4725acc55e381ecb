package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) Getenv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var emulator = map[string]string{
	"PUSHFAN_FCM_ENDPOINT":   "http://127.0.0.1:9099/v1",
	"PUSHFAN_FCM_PROJECT_ID": "demo",
}

func with(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range emulator {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestDefaultsWithEmulatorAreValid(t *testing.T) {
	cfg, err := Load(env(emulator))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.Concurrency != 4096 || cfg.HTTPAddr != ":8080" || cfg.HTTP.WaitTimeout != 25*time.Second {
		t.Fatalf("defaults %+v", cfg)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"PUSHFAN_MYSQL_DSN":              with(map[string]string{"PUSHFAN_MYSQL_DSN": "not a dsn@@"}),
		"PUSHFAN_CONCURRENCY":            with(map[string]string{"PUSHFAN_CONCURRENCY": "-3"}),
		"GOOGLE_APPLICATION_CREDENTIALS": {"PUSHFAN_FCM_PROJECT_ID": "demo"}, // real FCM, no credentials
		"PUSHFAN_SEND_TIMEOUT":           with(map[string]string{"PUSHFAN_SEND_TIMEOUT": "soon"}),
		"PUSHFAN_RATE_LIMIT":             with(map[string]string{"PUSHFAN_RATE_LIMIT": "0"}),
		"PUSHFAN_FCM_CLIENT":             with(map[string]string{"PUSHFAN_FCM_CLIENT": "grpc"}),
		"PUSHFAN_BROADCAST_CACHE":        with(map[string]string{"PUSHFAN_BROADCAST_CACHE": "-1s"}),
		"PUSHFAN_ADMIN_TOKENS":           with(map[string]string{"PUSHFAN_ADMIN_TOKENS": "short"}),
		"PUSHFAN_LEASE":                  with(map[string]string{"PUSHFAN_LEASE": "1s", "PUSHFAN_FLUSH_INTERVAL": "500ms"}),
		"PUSHFAN_WAIT_TIMEOUT":           with(map[string]string{"PUSHFAN_WAIT_TIMEOUT": "2m"}),
		"PUSHFAN_FCM_PROJECT_ID":         {"PUSHFAN_FCM_ENDPOINT": "http://127.0.0.1:9099/v1"},
		"PUSHFAN_FCM_ENDPOINT":           with(map[string]string{"PUSHFAN_FCM_ENDPOINT": "ftp://x"}),
		"PUSHFAN_LOG_LEVEL":              with(map[string]string{"PUSHFAN_LOG_LEVEL": "loud"}),
		"PUSHFAN_HOLD_EXPIRY":            with(map[string]string{"PUSHFAN_HOLD_EXPIRY": "0s"}),
		"PUSHFAN_RELEASE_FOUR_EYES":      with(map[string]string{"PUSHFAN_RELEASE_FOUR_EYES": "maybe"}),
		"PUSHFAN_METRICS_ADDR":           with(map[string]string{"PUSHFAN_METRICS_ADDR": "9090"}),
		"PUSHFAN_METRICS_TOKEN":          with(map[string]string{"PUSHFAN_METRICS_TOKEN": "short"}),
		"PUSHFAN_PREVIEWS_PER_MINUTE":    with(map[string]string{"PUSHFAN_PREVIEWS_PER_MINUTE": "0"}),
		"PUSHFAN_PREVIEW_CACHE":          with(map[string]string{"PUSHFAN_PREVIEW_CACHE": "1h"}),
	}
	for name, m := range cases {
		_, err := Load(env(m))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name it", name, err)
		}
	}
}

func TestEveryProblemIsListed(t *testing.T) {
	_, err := Load(env(with(map[string]string{"PUSHFAN_CONCURRENCY": "0", "PUSHFAN_PAGE_SIZE": "0"})))
	if err == nil || !strings.Contains(err.Error(), "PUSHFAN_CONCURRENCY") || !strings.Contains(err.Error(), "PUSHFAN_PAGE_SIZE") {
		t.Fatalf("want both problems, got %v", err)
	}
}

func TestYAMLFileAndEnvironmentPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte("http_addr: 127.0.0.1:9000\nengine:\n  concurrency: 64\n  page_size: 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path, "PUSHFAN_PAGE_SIZE": "700"})))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9000" || cfg.Engine.Concurrency != 64 || cfg.Engine.PageSize != 700 {
		t.Fatalf("got addr %s concurrency %d page %d", cfg.HTTPAddr, cfg.Engine.Concurrency, cfg.Engine.PageSize)
	}
	if err := os.WriteFile(path, []byte("engine:\n  concurency: 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path}))); err == nil || !strings.Contains(err.Error(), "concurency") {
		t.Fatalf("a misspelt key must be an error, got %v", err)
	}
}

func TestAdminTokensAreSplitAndTrimmed(t *testing.T) {
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_ADMIN_TOKENS": " aaaaaaaaaaaaaaaa , bbbbbbbbbbbbbbbb,,"})))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AdminTokens) != 2 || cfg.AdminTokens[1] != "bbbbbbbbbbbbbbbb" {
		t.Fatalf("tokens %q", cfg.AdminTokens)
	}
}

func TestParseAdminTokens(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	ts, err := ParseAdminTokens([]string{"plain-secret-0123456789", "dash:viewer:view-secret-0123456789", "ci:sender:sha256:" + hash,
		"rev:approver:approve-secret-0123456789", "ops:admin:admin-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	// A bare secret bootstraps the deployment: role admin.
	if ts[0].Name != "admin-1" || ts[0].Role != RoleAdmin || ts[1].Name != "dash" || ts[1].Role != RoleViewer || ts[2].Hash[0] != 0xab ||
		ts[3].Role != RoleApprover || ts[4].Name != "ops" || ts[4].Role != RoleAdmin {
		t.Fatalf("parsed %+v", ts)
	}
	for _, bad := range [][]string{
		{"short"},
		{"x:viewer:short"},
		{"x:owner:long-enough-secret-0123"},
		{"ci:sender:sha256:nothex"},
		{"a:viewer:long-enough-secret-0123", "a:sender:long-enough-secret-4567"},
		{"bad name:viewer:long-enough-secret-0123"},
	} {
		_, err := ParseAdminTokens(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret-0123") {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

// The metrics listener must differ from the API's; the metrics token is a
// secret of the environment only, and preview settings have their
// defaults.
func TestMetricsAndPreviewSettings(t *testing.T) {
	if _, err := Load(env(with(map[string]string{"PUSHFAN_HTTP_ADDR": "127.0.0.1:8080", "PUSHFAN_METRICS_ADDR": "127.0.0.1:8080"}))); err == nil || !strings.Contains(err.Error(), "PUSHFAN_METRICS_ADDR") {
		t.Fatalf("the API's address as the metrics listener: %v", err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_METRICS_ADDR": "127.0.0.1:9090", "PUSHFAN_METRICS_TOKEN": "scrape-token-0123456789"})))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != "127.0.0.1:9090" || cfg.MetricsToken != "scrape-token-0123456789" {
		t.Fatalf("metrics settings %q %q", cfg.MetricsAddr, cfg.MetricsToken)
	}
	if d := Defaults(); d.MetricsAddr != "" || d.MetricsToken != "" || d.HTTP.PreviewsPerMinute != 60 || d.HTTP.PreviewCache != 30*time.Second {
		t.Fatalf("defaults: metrics %q %q, previews %v per minute, cache %v", d.MetricsAddr, d.MetricsToken, d.HTTP.PreviewsPerMinute, d.HTTP.PreviewCache)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "pushfan.yaml")
	if err := os.WriteFile(path, []byte("metrics_addr: 127.0.0.1:9191\nhttp:\n  preview_cache: 5s\n  previews_per_minute: 20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(env(with(map[string]string{"PUSHFAN_CONFIG": path})))
	if err != nil || cfg.MetricsAddr != "127.0.0.1:9191" || cfg.HTTP.PreviewCache != 5*time.Second || cfg.HTTP.PreviewsPerMinute != 20 {
		t.Fatalf("from YAML: %v %q %v %v", err, cfg.MetricsAddr, cfg.HTTP.PreviewCache, cfg.HTTP.PreviewsPerMinute)
	}
}
