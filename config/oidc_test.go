package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The OIDC settings load from the YAML (oidc.roles, the issuer) and the
// environment (the secret), and a complete set is valid.
func TestOIDCFromYAMLAndEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	yaml := "oidc:\n  issuer: https://login.example.com\n  client_id: pushfan\n  roles:\n    push-admins: admin\n    push-approvers: approver\n    push-senders: sender\n    \"*\": viewer\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path, "PUSHFAN_OIDC_CLIENT_SECRET": "s3cret",
		"PUSHFAN_PUBLIC_URL": "https://push.example.com/", "PUSHFAN_TOKEN_SIGNIN": "false"})))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.OIDC
	if !o.On() || o.Issuer != "https://login.example.com" || o.ClientID != "pushfan" || o.ClientSecret != "s3cret" || o.RolesClaim != "groups" ||
		len(o.Roles) != 4 || o.Roles["*"] != "viewer" || o.Roles["push-admins"] != "admin" || cfg.HTTP.TokenSignIn {
		t.Fatalf("oidc %+v token sign-in %v", o, cfg.HTTP.TokenSignIn)
	}
	if got := cfg.RedirectURL(); got != "https://push.example.com/console/oidc/callback" {
		t.Fatalf("redirect URL %q", got)
	}
	if err := os.WriteFile(path, []byte("oidc:\n  client_secret: in-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(env(with(map[string]string{"PUSHFAN_CONFIG": path}))); err == nil || !strings.Contains(err.Error(), "client_secret") {
		t.Fatalf("a secret in the file must be an error, got %v", err)
	}
}

// Each half-configured sign-in is an error naming the setting or the
// YAML key at fault.
func TestOIDCErrorsNameTheSetting(t *testing.T) {
	full := map[string]string{"PUSHFAN_OIDC_ISSUER": "https://login.example.com", "PUSHFAN_OIDC_CLIENT_ID": "pushfan", "PUSHFAN_PUBLIC_URL": "https://push.example.com"}
	change := func(extra map[string]string, drop ...string) map[string]string {
		m := with(full)
		for _, k := range drop {
			delete(m, k)
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	roles := func(yaml string) map[string]string {
		path := filepath.Join(t.TempDir(), "pushfan.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return change(map[string]string{"PUSHFAN_CONFIG": path})
	}
	good := "oidc:\n  roles:\n    push-admins: admin\n"
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"PUSHFAN_OIDC_ISSUER", with(map[string]string{"PUSHFAN_OIDC_CLIENT_ID": "pushfan"})},
		{"PUSHFAN_TOKEN_SIGNIN", with(map[string]string{"PUSHFAN_TOKEN_SIGNIN": "false"})},
		{"PUSHFAN_OIDC_ISSUER", change(map[string]string{"PUSHFAN_OIDC_ISSUER": "ftp://login.example.com"})},
		{"PUSHFAN_OIDC_CLIENT_ID", change(nil, "PUSHFAN_OIDC_CLIENT_ID")},
		{"PUSHFAN_PUBLIC_URL", change(nil, "PUSHFAN_PUBLIC_URL")},
		{"PUSHFAN_OIDC_ROLES_CLAIM", roles(good + "  roles_claim: \"\"\n")},
		{"oidc.roles", change(nil)},
		{`oidc.roles["push-owners"]`, roles(good + "    push-owners: owner\n")},
	} {
		_, err := Load(env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: error %v does not name it", c.name, err)
		}
	}
	if _, err := Load(env(roles(good))); err != nil {
		t.Errorf("a complete OIDC configuration: %v", err)
	}
}
