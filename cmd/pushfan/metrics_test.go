package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// `pushfan serve` with PUSHFAN_METRICS_ADDR serves the metrics there
// without a token, keeps them from anonymous callers of the API's
// listener, and stops the metrics listener with the rest on SIGTERM.
func TestServeMetricsOnTheirOwnListener(t *testing.T) {
	const token = "metrics-test-admin-token-0123"
	tdb := testdb.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	p := teststack.StartServe(t, binary, "pushfan", append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+tdb.DSN,
		"PUSHFAN_FCM_ENDPOINT=http://127.0.0.1:9/v1", // never contacted
		"PUSHFAN_FCM_PROJECT_ID=metrics-test",
		"PUSHFAN_ADMIN_TOKENS="+token,
		"PUSHFAN_METRICS_ADDR="+metricsAddr,
		"PUSHFAN_LOG_FORMAT=text",
	))
	get := func(url, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if code, body := get("http://"+metricsAddr+"/metrics", ""); code != 200 || !strings.Contains(body, "pushfan_fcm_sends_in_flight") {
		t.Fatalf("GET /metrics on PUSHFAN_METRICS_ADDR: %d %.200q", code, body)
	}
	if code, _ := get(p.URL+"/metrics", ""); code != 401 {
		t.Fatalf("GET /metrics on the API's listener without a token: %d, want 401", code)
	}
	if code, _ := get(p.URL+"/metrics", token); code != 200 {
		t.Fatalf("GET /metrics on the API's listener with the admin token: %d, want 200", code)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.WaitExit(t, "SIGTERM")
	if p.ExitErr != nil {
		t.Fatalf("serve exited with %v after SIGTERM", p.ExitErr)
	}
	if c, err := net.Dial("tcp", metricsAddr); err == nil {
		c.Close()
		t.Fatal("the metrics listener still accepts connections after serve exited")
	}
}
