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
	ts, err := ParseAdminTokens([]string{"plain-secret-0123456789", "dash:viewer:view-secret-0123456789", "ci:sender:sha256:" + hash})
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].Name != "admin-1" || ts[0].Role != RoleSender || ts[1].Name != "dash" || ts[1].Role != RoleViewer || ts[2].Hash[0] != 0xab {
		t.Fatalf("parsed %+v", ts)
	}
	for _, bad := range [][]string{
		{"short"},
		{"x:viewer:short"},
		{"x:admin:long-enough-secret-0123"},
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
