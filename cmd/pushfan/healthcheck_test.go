package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// healthcheckRun runs `pushfan healthcheck` against addr, as a container
// runtime would: the exit status and what it said on stderr.
func healthcheckRun(t *testing.T, addr string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"healthcheck"}, args...)...)
	cmd.Env = append(os.Environ(), "PUSHFAN_HTTP_ADDR="+addr, "PUSHFAN_CONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("pushfan healthcheck against %s did not return within 20s", addr)
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running pushfan healthcheck: %v", err)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("healthcheck wrote to stdout: %q", stdout.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// assertOneLineFailure checks a failed probe: exit 1, one line naming why.
func assertOneLineFailure(t *testing.T, code int, stderr, why string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit status %d, want 1; stderr %q", code, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("the reason is not one line: %q", stderr)
	}
	if !strings.Contains(stderr, why) {
		t.Errorf("the reason %q does not say %q", stderr, why)
	}
}

// A real server: ready (exit 0), then cut off from its database, which
// makes /readyz answer 503 (exit 1 naming database_unreachable), then
// ready again, then gone (exit 1, connection refused).
func TestHealthcheckUpNotReadyAndDown(t *testing.T) {
	tdb := testdb.New(t)
	proxy := teststack.NewProxy(t, "127.0.0.1:3306")
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	emuSrv := httptest.NewServer(emu.Handler())
	t.Cleanup(emuSrv.Close)
	p := teststack.StartServe(t, binary, "serve", append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+proxy.DSN(tdb.DSN),
		"PUSHFAN_FCM_ENDPOINT="+emuSrv.URL+"/v1",
		"PUSHFAN_FCM_PROJECT_ID=healthcheck",
		"PUSHFAN_LOG_FORMAT=text",
		"PUSHFAN_CONFIG=",
	))
	addr := strings.TrimPrefix(p.URL, "http://")

	if code, stderr := healthcheckRun(t, addr); code != 0 {
		t.Fatalf("healthcheck of a ready server: exit %d: %s", code, stderr)
	}

	proxy.Cut()
	var code int
	var stderr string
	teststack.WaitEvery(t, "healthcheck to fail once the database is cut", 15*time.Second, 100*time.Millisecond, func() bool {
		code, stderr = healthcheckRun(t, addr)
		return code != 0
	})
	assertOneLineFailure(t, code, stderr, "503 Service Unavailable: database_unreachable")

	proxy.Restore()
	teststack.WaitEvery(t, "healthcheck to pass once the database is back", 15*time.Second, 100*time.Millisecond, func() bool {
		code, stderr = healthcheckRun(t, addr)
		return code == 0
	})

	_ = p.Cmd.Process.Kill()
	p.WaitExit(t, "kill -9")
	code, stderr = healthcheckRun(t, addr)
	assertOneLineFailure(t, code, stderr, "connection refused")
}

// A listener that accepts and never answers: the probe gives up at its
// timeout rather than hanging the runtime's check.
func TestHealthcheckTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	code, stderr := healthcheckRun(t, ln.Addr().String(), "-timeout", "300ms")
	assertOneLineFailure(t, code, stderr, "no answer within 300ms")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the probe took %v with -timeout 300ms", took)
	}
}

func TestHealthcheckURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/readyz",
		"0.0.0.0:80":     "http://127.0.0.1:80/readyz",
		"[::]:8080":      "http://[::1]:8080/readyz",
		"10.0.0.5:8080":  "http://10.0.0.5:8080/readyz",
		"localhost:9000": "http://localhost:9000/readyz",
	} {
		if got, err := localURL(addr, "/readyz"); err != nil || got != want {
			t.Errorf("localURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := localURL("8080", "/readyz"); err == nil {
		t.Error(`localURL("8080", "/readyz") took an address without a port separator`)
	}
}
