package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pushfan/config"
	"pushfan/internal/testsupport/testdb"
)

// config check tests a schema mapping against the database as start-up
// does: a good mapping passes, a mistyped column is reported by its key.
func TestConfigCheckSchema(t *testing.T) {
	db := testdb.New(t)
	if _, err := db.SQL.Exec(`CREATE TABLE members (member_id BIGINT UNSIGNED PRIMARY KEY, push_agree CHAR(1) NOT NULL DEFAULT 'Y')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec(`CREATE TABLE push_devices (device_seq BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, member_id BIGINT UNSIGNED NOT NULL,
		fcm_token VARCHAR(512) NOT NULL, deleted_yn CHAR(1) NOT NULL DEFAULT 'N')`); err != nil {
		t.Fatal(err)
	}
	yaml := func(token string) string {
		return `schema:
  users:
    table: members
    id: member_id
    push_enabled: "push_agree = 'Y'"
  tokens:
    table: push_devices
    id: device_seq
    user_id: member_id
    token: ` + token + `
    valid: "deleted_yn = 'N'"
    on_dead: "UPDATE push_devices SET deleted_yn = 'Y' WHERE device_seq = :id"
`
	}
	dir := t.TempDir()
	env := goodEnv()
	env["PUSHFAN_MYSQL_DSN"] = db.DSN
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	check := func(token string) (string, error) {
		path := filepath.Join(dir, token+".yaml")
		if err := os.WriteFile(path, []byte(yaml(token)), 0o600); err != nil {
			t.Fatal(err)
		}
		env["PUSHFAN_CONFIG"] = path
		var stdout, stderr bytes.Buffer
		err := configCheck(config.Getenv(getenv), &stdout, &stderr)
		return stderr.String(), err
	}
	if report, err := check("fcm_token"); err != nil {
		t.Fatalf("a good mapping failed the check: %v\n%s", err, report)
	}
	report, err := check("fcm_tokn")
	if err == nil || !strings.Contains(report, "schema.tokens.token: column fcm_tokn not found in push_devices") {
		t.Fatalf("a mistyped column: err %v, report:\n%s", err, report)
	}
}
