package fcmemu_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"

	"pushfan/fcmemu"
)

// runMain starts Main and returns the URL it announced and a stop function returning Main's
// result.
func runMain(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := fcmemu.Main(ctx, args, pw, testLogger(t))
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, pr)
	}()
	var line string
	select {
	case line = <-lines:
	case err := <-done:
		cancel()
		t.Fatalf("Main returned before announcing: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Main did not announce readiness")
	}
	const prefix, suffix = "fcmemu listening on ", "/v1 (project any)"
	if !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, suffix) {
		cancel()
		t.Fatalf("readiness line %q", line)
	}
	stopped := false
	var result error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = receive(t, "Main to return after its context ended", done)
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return strings.TrimSuffix(strings.TrimPrefix(line, prefix), "/v1 (project any)"), stop
}

func TestMainServesAndShutsDown(t *testing.T) {
	base, stop := runMain(t, "--addr", "127.0.0.1:0", "--latency", "1ms", "--error-rate", "unregistered=1", "--seed", "7")
	c := sdkClient(t, base)
	if _, err := send(t, c, "via-main"); !messaging.IsUnregistered(err) {
		t.Fatalf("send with UNREGISTERED=1: %v", err)
	}
	var cfg fcmemu.Config
	getJSON(t, base+"/emulator/config", &cfg)
	if cfg.Latency != time.Millisecond || cfg.ErrorRates["UNREGISTERED"] != 1 || cfg.Seed != 7 {
		t.Fatalf("config %+v", cfg)
	}
	if err := stop(); err != nil {
		t.Fatalf("Main: %v", err)
	}
	if _, err := http.Get(base + "/emulator/stats"); err == nil {
		t.Fatal("server still answering after Main returned")
	}
}

func TestMainTLSWritesCA(t *testing.T) {
	caPath := filepath.Join(t.TempDir(), "ca.pem")
	base, stop := runMain(t, "--addr", "127.0.0.1:0", "--tls", "--ca-out", caPath, "--latency", "0")
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base %q", base)
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	if resp := postSend(t, hc, base); resp.ProtoMajor != 2 {
		t.Fatalf("proto %s", resp.Proto)
	}
	hc.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Fatalf("Main: %v", err)
	}
}

func TestMainBadFlagsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--latency", "fast"}, "latency"},
		{[]string{"--latency", "-1s"}, "--latency"},
		{[]string{"--error-rate", "BOGUS=0.1"}, "error-rate"},
		{[]string{"--error-rate", "INTERNAL"}, "error-rate"},
		{[]string{"--error-rate", "INTERNAL=2"}, "error-rate"},
		{[]string{"--error-rate", "INTERNAL=0.6", "--error-rate", "UNAVAILABLE=0.6"}, "--error-rate"},
		{[]string{"--quota", "-5"}, "--quota"},
		{[]string{"--storm-for", "x"}, "storm-for"},
		{[]string{"--h2c", "--tls"}, "--h2c"},
		{[]string{"--ca-out", "x.pem"}, "--ca-out"},
		{[]string{"--nope"}, "nope"},
		{[]string{"extra"}, "extra"},
		{[]string{"--addr", "256.0.0.1:1"}, "--addr"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fcmemu.Main(ctx, tc.args, io.Discard, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Main(%v) = %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
