package config

import (
	"reflect"
	"strings"
	"testing"
)

func printEnv(m map[string]string) Getenv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestEffectiveCoversEveryVariable fails when a variable is added in a shape
// Effective cannot map to a field: it would print "(not shown)".
func TestEffectiveCoversEveryVariable(t *testing.T) {
	var probe Config
	for _, v := range variables(&probe) {
		if _, ok := fieldOf(&probe, v); !ok {
			t.Errorf("%s: no Config field found for it; teach fieldOf a probe value its setter accepts", v.name)
		}
	}
	got := Defaults().Effective()
	want := Variables()[1:] // all but PUSHFAN_CONFIG
	if len(got) != len(want) {
		t.Fatalf("Effective lists %d settings, Variables %d", len(got), len(want))
	}
	for i, s := range got {
		if s.Name != want[i] {
			t.Errorf("setting %d is %s, want %s (the order of Variables)", i, s.Name, want[i])
		}
	}
}

// TestEffectiveRoundTrips feeds the printed values back into Load: every
// non-secret value prints in the syntax its variable accepts.
func TestEffectiveRoundTrips(t *testing.T) {
	env := map[string]string{
		"PUSHFAN_MYSQL_DSN":        "app@tcp(db:3306)/push?parseTime=true",
		"PUSHFAN_FCM_ENDPOINT":     "http://127.0.0.1:9099/v1",
		"PUSHFAN_FCM_PROJECT_ID":   "demo",
		"PUSHFAN_FCM_H2C":          "true",
		"PUSHFAN_FCM_CLIENT":       "sdk",
		"PUSHFAN_CONCURRENCY":      "300",
		"PUSHFAN_RATE_LIMIT":       "1234.5",
		"PUSHFAN_RETRY_BASE_DELAY": "750ms",
		"PUSHFAN_HTTP_BODY_LIMIT":  "4096",
		"PUSHFAN_INSTANCE_ID":      "api-1",
		"PUSHFAN_LOG_LEVEL":        "debug",
	}
	cfg, err := Load(printEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]string{}
	for _, s := range cfg.Effective() {
		if s.Secret {
			t.Errorf("%s=%s is marked secret", s.Name, s.Value)
		}
		printed[s.Name] = s.Value
	}
	again, err := Load(printEnv(printed))
	if err != nil {
		t.Fatalf("loading the printed configuration: %v", err)
	}
	if !reflect.DeepEqual(cfg, again) {
		t.Fatalf("round trip changed the configuration:\nbefore %+v\nafter  %+v", cfg, again)
	}
	for name, want := range map[string]string{
		"PUSHFAN_CONCURRENCY": "300", "PUSHFAN_RATE_LIMIT": "1234.5", "PUSHFAN_RETRY_BASE_DELAY": "750ms",
		"PUSHFAN_FCM_H2C": "true", "PUSHFAN_FCM_CLIENT": "sdk", "PUSHFAN_HTTP_ADDR": ":8080", "PUSHFAN_SEND_TIMEOUT": "10s",
		"PUSHFAN_ADMIN_TOKENS": "", "GOOGLE_APPLICATION_CREDENTIALS": "",
	} {
		if printed[name] != want {
			t.Errorf("%s printed as %q, want %q", name, printed[name], want)
		}
	}
}

func TestEffectiveMasksSecrets(t *testing.T) {
	const (
		tok1     = "first-admin-token-0123456789"
		tok2     = "second-admin-token-abcdefghij"
		internal = "internal-cron-token-zyxwvut"
		scraper  = "metrics-scrape-token-qponmlk"
		password = "s3cr3t-p4ss"
		tok3     = "third-admin-token-viewer-0001"
		hash     = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	)
	cfg, err := Load(printEnv(map[string]string{
		"PUSHFAN_MYSQL_DSN":              "pushfan:" + password + "@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		"PUSHFAN_ADMIN_TOKENS":           tok1 + "," + tok2 + ",ops:viewer:" + tok3 + ",cron:sender:sha256:" + hash,
		"PUSHFAN_INTERNAL_TOKEN":         internal,
		"PUSHFAN_METRICS_TOKEN":          scraper,
		"PUSHFAN_FCM_ENDPOINT":           "http://127.0.0.1:9099/v1",
		"PUSHFAN_FCM_PROJECT_ID":         "demo",
		"GOOGLE_APPLICATION_CREDENTIALS": "/etc/pushfan/sa.json",
	}))
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]Setting{}
	var all strings.Builder
	for _, s := range cfg.Effective() {
		printed[s.Name] = s
		all.WriteString(s.Name + "=" + s.Value + "\n")
	}
	for _, secret := range []string{tok1, tok2, tok3, hash, internal, scraper, password} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("%q appears in\n%s", secret, all.String())
		}
	}
	for name, want := range map[string]string{
		"PUSHFAN_ADMIN_TOKENS":           "****,****,ops:viewer:****,cron:sender:****",
		"PUSHFAN_INTERNAL_TOKEN":         "****",
		"PUSHFAN_METRICS_TOKEN":          "****",
		"PUSHFAN_MYSQL_DSN":              "pushfan:****@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		"GOOGLE_APPLICATION_CREDENTIALS": "/etc/pushfan/sa.json",
	} {
		if got := printed[name].Value; got != want {
			t.Errorf("%s=%s, want %s", name, got, want)
		}
	}
	if !printed["PUSHFAN_ADMIN_TOKENS"].Secret || !printed["PUSHFAN_MYSQL_DSN"].Secret || printed["GOOGLE_APPLICATION_CREDENTIALS"].Secret {
		t.Errorf("Secret flags wrong: %+v", printed)
	}
}

func TestMaskDSN(t *testing.T) {
	for in, want := range map[string]string{
		"root@tcp(127.0.0.1:3306)/pushfan?parseTime=true": "root@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		"root:@tcp(127.0.0.1:3306)/pushfan":               "root:@tcp(127.0.0.1:3306)/pushfan",
		"u:p@ss:w/rd@tcp(h:1)/db":                         "u:****@tcp(h:1)/db", // the driver splits at the last '@' before the last '/'
		"u:pw@unix(/run/mysqld/mysqld.sock)/db?loc=Local": "u:****@unix(/run/mysqld/mysqld.sock)/db?loc=Local",
		"u:pw@tcp(h:1)": "u:****@tcp(h:1)", // invalid (no /db) but still masked
		"/pushfan":      "/pushfan",
		"":              "",
		"user:with:colons@tcp(127.0.0.1:3306)/pushfan?x=y": "user:****@tcp(127.0.0.1:3306)/pushfan?x=y",
		"justapassword-looking-string-without-any-at-sign": "justapassword-looking-string-without-any-at-sign",
	} {
		if got := MaskDSN(in); got != want {
			t.Errorf("MaskDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
