package main

// The files in deploy/ that the tests check (docs/deployment.md says which
// are examples): the systemd unit passes systemd-analyze verify, the
// example config wires a whole instance, and compose.yaml keeps its
// promises.

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/testdb"
)

const deployDir = "../../deploy"

func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (Debian: apt-get install systemd)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, "pushfan.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	// The hardening and the notify protocol the unit promises.
	for _, want := range []string{
		"Type=notify\n", "WatchdogSec=", "DynamicUser=yes\n", "ProtectSystem=strict\n", "NoNewPrivileges=yes\n",
		"RestartSec=", "LimitNOFILE=", "ExecStart=/usr/local/bin/pushfan serve\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("deploy/pushfan.service has no %q", want)
		}
	}
	// verify checks that ExecStart's binary exists: point it at the one
	// built for the test, in a copy of the unit.
	bin := mustStaticBinary(t)
	unit = strings.Replace(unit, "ExecStart=/usr/local/bin/pushfan ", "ExecStart="+bin+" ", 1)
	path := filepath.Join(t.TempDir(), "pushfan.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// verify exits 0 on an unknown key, with a warning: any output fails.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify deploy/pushfan.service: %v\n%s", err, out)
	}
}

// exampleEnv is what the example config needs beside itself: a database
// and an FCM endpoint (the emulator: no credentials).
func exampleEnv(t *testing.T) config.Getenv {
	tdb := testdb.New(t)
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(emu.Handler())
	t.Cleanup(srv.Close)
	env := map[string]string{
		"PUSHFAN_CONFIG":         filepath.Join(deployDir, "pushfan.example.yaml"),
		"PUSHFAN_MYSQL_DSN":      tdb.DSN,
		"PUSHFAN_FCM_ENDPOINT":   srv.URL + "/v1",
		"PUSHFAN_FCM_PROJECT_ID": "example-config",
		"PUSHFAN_ADMIN_TOKENS":   "example-config-admin-token-0123",
		"PUSHFAN_INTERNAL_TOKEN": "example-config-internal-token-0123",
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// The example config passes `pushfan config check` (its schema mapping
// against a migrated database) and wires an instance as serve does: its
// audiences' queries prepared, its jobs and webhooks compiled.
func TestExampleConfigWiresAnInstance(t *testing.T) {
	getenv := exampleEnv(t)
	var stdout, stderr bytes.Buffer
	if err := configCheck(getenv, &stdout, &stderr); err != nil {
		t.Fatalf("config check of deploy/pushfan.example.yaml: %v\n%s", err, stderr.String())
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	dsn, _ := getenv("PUSHFAN_MYSQL_DSN")
	pool, err := openDB(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("opening %s: %v", dsn, err)
	}
	t.Cleanup(func() { pool.Close() })
	inst, err := app.New(t.Context(), cfg, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("wiring an instance from deploy/pushfan.example.yaml: %v", err)
	}
	inst.Sender.Close()
	if !cfg.Schema.Mapped() || len(cfg.Audiences) == 0 || len(cfg.Jobs) == 0 || len(cfg.Webhooks) == 0 {
		t.Errorf("the example lost a section: schema mapped %v, %d audiences, %d jobs, %d webhooks",
			cfg.Schema.Mapped(), len(cfg.Audiences), len(cfg.Jobs), len(cfg.Webhooks))
	}
}

// Every structured section of the config (a struct, list or map) appears
// in the example: a section added to config.Config fails this test until
// the example shows it.
func TestExampleConfigCoversEverySection(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "pushfan.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Struct, reflect.Slice, reflect.Map:
			if _, ok := top[key]; !ok {
				t.Errorf("deploy/pushfan.example.yaml has no %s: section (config.Config.%s)", key, f.Name)
			}
		}
	}
}

func TestComposeFileKeepsItsPromises(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string         `yaml:"image"`
			Command     []string       `yaml:"command"`
			Environment map[string]any `yaml:"environment"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Volumes []string `yaml:"volumes"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	db, pf, mig := c.Services["mariadb"], c.Services["pushfan"], c.Services["migrate"]
	if len(db.Healthcheck.Test) == 0 {
		t.Error("mariadb has no healthcheck")
	}
	if got := pf.DependsOn["mariadb"].Condition; got != "service_healthy" {
		t.Errorf("pushfan depends on mariadb with condition %q, want service_healthy", got)
	}
	if !slices.Equal(mig.Command, []string{"migrate"}) || pf.DependsOn["migrate"].Condition != "service_completed_successfully" {
		t.Errorf("the migrations do not run first: migrate's command %v, pushfan waits on it with %q", mig.Command, pf.DependsOn["migrate"].Condition)
	}
	if !slices.Equal(pf.Command, []string{"serve"}) || !slices.Contains(pf.Ports, "8080:8080") {
		t.Errorf("pushfan: command %v, ports %v; want serve on 8080:8080", pf.Command, pf.Ports)
	}
	if addr := pf.Environment["PUSHFAN_HTTP_ADDR"]; addr != ":8080" {
		t.Errorf("pushfan listens on %v, not the published :8080", addr)
	}
	if !slices.Contains(pf.Volumes, "./config:/etc/pushfan:ro") || pf.Environment["PUSHFAN_CONFIG"] != "/etc/pushfan/pushfan.yaml" {
		t.Errorf("pushfan's config: volumes %v, PUSHFAN_CONFIG %v", pf.Volumes, pf.Environment["PUSHFAN_CONFIG"])
	}
	if !slices.Equal(pf.Healthcheck.Test, []string{"CMD", "/pushfan", "healthcheck"}) {
		t.Errorf("pushfan's healthcheck is %v", pf.Healthcheck.Test)
	}
	if !strings.Contains(pf.Environment["PUSHFAN_MYSQL_DSN"].(string), "@tcp(mariadb:3306)/") {
		t.Errorf("pushfan's DSN %v does not reach the mariadb service", pf.Environment["PUSHFAN_MYSQL_DSN"])
	}
}
