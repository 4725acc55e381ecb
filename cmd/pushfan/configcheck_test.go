package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pushfan/config"
	"pushfan/internal/testsupport/testdb"
)

const (
	checkToken1   = "config-check-admin-token-AAAA1111"
	checkToken2   = "config-check-admin-token-BBBB2222"
	checkInternal = "config-check-internal-token-CCCC3333"
	checkPassword = "config-check-db-password-DDDD"
)

// setEnv replaces the process environment's pushfan variables with vars for
// the test: every variable pushfan reads is set, to "" (which Load treats as
// unset) when vars does not name it.
func setEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, name := range config.Variables() {
		t.Setenv(name, vars[name])
	}
}

func goodEnv() map[string]string {
	return map[string]string{
		"PUSHFAN_MYSQL_DSN":      "pushfan:" + checkPassword + "@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		"PUSHFAN_HTTP_ADDR":      "127.0.0.1:18080",
		"PUSHFAN_FCM_ENDPOINT":   "http://127.0.0.1:9099/v1",
		"PUSHFAN_FCM_PROJECT_ID": "demo",
		"PUSHFAN_ADMIN_TOKENS":   checkToken1 + "," + checkToken2,
		"PUSHFAN_INTERNAL_TOKEN": checkInternal,
		"PUSHFAN_CONCURRENCY":    "256",
		"PUSHFAN_SEND_TIMEOUT":   "3s",
	}
}

func TestConfigCheckGood(t *testing.T) {
	setEnv(t, goodEnv())
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"config", "check"}, &stdout, &stderr); err != nil {
		t.Fatalf("config check: %v\nstderr:\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, secret := range []string{checkToken1, checkToken2, checkInternal, checkPassword} {
		if strings.Contains(out+stderr.String(), secret) {
			t.Errorf("secret %q printed:\n%s", secret, out)
		}
	}
	lines := map[string]string{}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is not NAME=value", line)
		}
		lines[name] = value
		order = append(order, name)
	}
	if want := config.Variables(); strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("variables printed in order\n%v\nwant\n%v", order, want)
	}
	for name, want := range map[string]string{
		"PUSHFAN_CONFIG":         "",
		"PUSHFAN_MYSQL_DSN":      "pushfan:****@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		"PUSHFAN_HTTP_ADDR":      "127.0.0.1:18080",
		"PUSHFAN_ADMIN_TOKENS":   "****,****",
		"PUSHFAN_INTERNAL_TOKEN": "****",
		"PUSHFAN_CONCURRENCY":    "256",
		"PUSHFAN_SEND_TIMEOUT":   "3s",
		"PUSHFAN_PAGE_SIZE":      "1000", // a default
		"PUSHFAN_LOG_FORMAT":     "json",
	} {
		if got, ok := lines[name]; !ok || got != want {
			t.Errorf("%s=%q, want %q", name, got, want)
		}
	}
}

func TestConfigCheckBad(t *testing.T) {
	env := goodEnv()
	delete(env, "PUSHFAN_FCM_ENDPOINT") // real FCM with no credentials
	env["PUSHFAN_CONCURRENCY"] = "lots"
	env["PUSHFAN_SEND_TIMEOUT"] = "soon"
	env["PUSHFAN_LOG_LEVEL"] = "loud"
	env["PUSHFAN_ADMIN_TOKENS"] = "short," + checkToken1
	env["PUSHFAN_HTTP_ADDR"] = "no-port"
	setEnv(t, env)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"config", "check"}, &stdout, &stderr)
	if err == nil {
		t.Fatalf("config check passed an invalid configuration:\n%s", stdout.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("an invalid configuration printed settings:\n%s", stdout.String())
	}
	report := stderr.String()
	// Parse errors (which stop config.Load before validation) and rule
	// violations are reported together, each on its own line.
	problemLines := map[string]string{}
	for _, line := range strings.Split(report, "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.HasPrefix(line, "  ") {
			problemLines[name] = line
		}
	}
	for _, name := range []string{
		"PUSHFAN_CONCURRENCY", "PUSHFAN_SEND_TIMEOUT", "PUSHFAN_LOG_LEVEL",
		"PUSHFAN_ADMIN_TOKENS", "PUSHFAN_HTTP_ADDR", "GOOGLE_APPLICATION_CREDENTIALS",
	} {
		if _, ok := problemLines[name]; !ok {
			t.Errorf("no problem line names %s:\n%s", name, report)
		}
	}
	if !strings.Contains(report, "(6 problems)") || !strings.Contains(err.Error(), "6 problems") {
		t.Errorf("want 6 problems counted; err %v, report:\n%s", err, report)
	}
	if strings.Contains(report, checkToken1) || strings.Contains(report, checkPassword) {
		t.Errorf("the problem report leaks a secret:\n%s", report)
	}
}

func TestConfigCheckYAML(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("engine:\n  concurrency: 64\n  chunk_parallel: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("engine:\n  concurency: 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := goodEnv()
	delete(env, "PUSHFAN_CONCURRENCY")
	getenv := func(m map[string]string) config.Getenv {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}

	env["PUSHFAN_CONFIG"] = good
	var stdout, stderr bytes.Buffer
	if err := configCheck(getenv(env), &stdout, &stderr); err != nil {
		t.Fatalf("good file: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"PUSHFAN_CONFIG=" + good + "\n", "PUSHFAN_CONCURRENCY=64\n", "PUSHFAN_CHUNK_PARALLEL=2\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}

	env["PUSHFAN_CONFIG"] = bad
	stdout.Reset()
	stderr.Reset()
	if err := configCheck(getenv(env), &stdout, &stderr); err == nil {
		t.Fatalf("a file with a misspelt key passed:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "PUSHFAN_CONFIG:") || !strings.Contains(stderr.String(), "concurency") {
		t.Errorf("the report does not name the file's problem:\n%s", stderr.String())
	}
}

// Named audiences and jobs are compiled by their own packages, not by
// config: the check still reports their problems, each under
// PUSHFAN_CONFIG, together with the settings' own.
func TestConfigCheckReportsAudienceAndJobProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "defs.yaml")
	yaml := "audiences:\n  - name: all\n    sql: SELECT 1\n" +
		"jobs:\n  - name: j\n    schedule: \"not a schedule\"\n    audience: {all: true}\n    message: {title: t}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := goodEnv()
	env["PUSHFAN_CONFIG"] = path
	env["PUSHFAN_PAGE_SIZE"] = "0" // a setting's problem beside them
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var stdout, stderr bytes.Buffer
	if err := configCheck(getenv, &stdout, &stderr); err == nil {
		t.Fatalf("a config with a bad audience and job passed:\n%s", stdout.String())
	}
	for _, want := range []string{"PUSHFAN_CONFIG: audiences:", "PUSHFAN_CONFIG: jobs:", "PUSHFAN_PAGE_SIZE"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, stderr.String())
		}
	}
	delete(env, "PUSHFAN_PAGE_SIZE")
	stderr.Reset()
	if err := configCheck(getenv, &stdout, &stderr); err == nil || !strings.Contains(stderr.String(), "PUSHFAN_CONFIG: jobs:") {
		t.Fatalf("valid settings with a bad job: err %v\n%s", err, stderr.String())
	}
}

// TestConfigCheckExitStatus runs the real binary: exit 0 on a good
// configuration, 1 with the problems on stderr on a bad one.
func TestConfigCheckExitStatus(t *testing.T) {
	runBin := func(vars map[string]string) (string, string, error) {
		cmd := exec.Command(binary, "config", "check")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := runBin(goodEnv())
	if err != nil {
		t.Fatalf("good configuration: %v\n%s", err, errOut)
	}
	if strings.Contains(out, checkToken1) || !strings.Contains(out, "PUSHFAN_ADMIN_TOKENS=****,****") {
		t.Errorf("output:\n%s", out)
	}

	env := goodEnv()
	env["PUSHFAN_PAGE_SIZE"] = "0"
	env["PUSHFAN_LEASE"] = "1ms"
	_, errOut, err = runBin(env)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("bad configuration: err %v, want exit status 1\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "  PUSHFAN_PAGE_SIZE:") || !strings.Contains(errOut, "  PUSHFAN_LEASE:") {
		t.Errorf("stderr does not list both problems:\n%s", errOut)
	}
}

// Each subcommand checks only what it uses: migrate and seed need the
// database, not FCM credentials or admin tokens; the emulator needs
// neither (a DSN that does not even parse is no matter to it).
func TestSubcommandsCheckWhatTheyUse(t *testing.T) {
	dsn := testdb.New(t).DSN
	setEnv(t, map[string]string{"PUSHFAN_MYSQL_DSN": dsn, "PUSHFAN_LOG_FORMAT": "text"})
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"migrate"}, &out, &errOut); err != nil {
		t.Fatalf("migrate with only a DSN: %v\n%s", err, errOut.String())
	}
	if err := run(context.Background(), []string{"seed", "-users", "3"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "seeded 3 users") {
		t.Fatalf("seed with only a DSN: %v\n%s%s", err, out.String(), errOut.String())
	}
	err := run(context.Background(), []string{"serve"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Fatalf("serve without FCM settings: %v, want the credentials named", err)
	}
	setEnv(t, map[string]string{"PUSHFAN_MYSQL_DSN": "not a dsn"})
	out.Reset()
	// The emulator gets as far as its own flags (-h stops it there).
	if err := run(context.Background(), []string{"emulator", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("emulator -h with a broken DSN: %v, want its own help", err)
	}
	if err := run(context.Background(), []string{"migrate"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "PUSHFAN_MYSQL_DSN") {
		t.Fatalf("migrate with a broken DSN: %v, want the DSN named", err)
	}
	if err := run(context.Background(), []string{"frobnicate"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("an unknown command: %v", err)
	}
}
