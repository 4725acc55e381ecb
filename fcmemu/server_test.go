package fcmemu_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"

	"pushfan/fcmemu"
)

// serve runs e.Serve on a loopback port until the test ends and returns the base URL and a
// function that stops the server and returns Serve's result.
func serve(t *testing.T, e *fcmemu.Emulator, opts fcmemu.ServerOptions) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, ln, opts) }()
	var once bool
	var result error
	stop := func() error {
		if !once {
			once = true
			cancel()
			result = receive(t, "Serve to return after its context ended", done)
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	scheme := "http"
	if opts.Mode == fcmemu.ModeTLS {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String(), stop
}

const sendBody = `{"message":{"token":"proto-token","data":{"a":"b"}}}`

func postSend(t *testing.T, c *http.Client, base string) *http.Response {
	t.Helper()
	resp, err := c.Post(base+"/v1/projects/p/messages:send", "application/json", strings.NewReader(sendBody))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to EOF so the connection can be reused
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %s", resp.Status)
	}
	return resp
}

func TestH2CNegotiatesHTTP2(t *testing.T) {
	e := fcmemu.New(fcmemu.Config{}, testLogger(t))
	base, stop := serve(t, e, fcmemu.ServerOptions{Mode: fcmemu.ModeH2C})

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	if resp := postSend(t, h2c, base); resp.ProtoMajor != 2 {
		t.Fatalf("proto %s, want HTTP/2", resp.Proto)
	}
	// HTTP/1.1 still works on the same port.
	if resp := postSend(t, &http.Client{}, base); resp.ProtoMajor != 1 {
		t.Fatalf("proto %s, want HTTP/1.1", resp.Proto)
	}
	// And the SDK over h2c.
	c := sdkClient(t, base, option.WithHTTPClient(h2c))
	if _, err := send(t, c, "sdk-over-h2c"); err != nil {
		t.Fatalf("SDK over h2c: %v", err)
	}
	if s := e.Stats(); s.ConnectionsAccepted < 2 || s.Accepted != 3 {
		t.Fatalf("stats %+v", s)
	}
	h2c.CloseIdleConnections() // else HTTP/2 graceful shutdown waits its GOAWAY timeout
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestTLSWithGeneratedCA(t *testing.T) {
	e := fcmemu.New(fcmemu.Config{}, testLogger(t))
	cert, caPEM, err := fcmemu.GenerateCert(nil)
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, e, fcmemu.ServerOptions{Mode: fcmemu.ModeTLS, Certificate: &cert})

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	if resp := postSend(t, hc, base); resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Fatalf("proto %s tls %v, want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	// localhost is in the certificate too.
	if resp := postSend(t, hc, strings.Replace(base, "127.0.0.1", "localhost", 1)); resp.ProtoMajor != 2 {
		t.Fatalf("localhost proto %s", resp.Proto)
	}
	// Without the CA the certificate is refused.
	if _, err := http.Post(base+"/v1/projects/p/messages:send", "application/json", strings.NewReader(sendBody)); err == nil {
		t.Fatal("untrusted certificate accepted")
	}
	c := sdkClient(t, base, option.WithHTTPClient(hc))
	if _, err := send(t, c, "sdk-over-tls"); err != nil {
		t.Fatalf("SDK over TLS: %v", err)
	}
	hc.CloseIdleConnections() // else HTTP/2 graceful shutdown waits its GOAWAY timeout
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// NewServer writes the CA file before returning, for clients in another process.
func TestNewServerWritesCAOut(t *testing.T) {
	e := fcmemu.New(fcmemu.Config{}, testLogger(t))
	caPath := filepath.Join(t.TempDir(), "ca.pem")
	srv, err := e.NewServer("127.0.0.1:0", fcmemu.ServerOptions{Mode: fcmemu.ModeTLS, CAOut: caPath})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatalf("CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	if _, err := srv.TLSConfig.Certificates[0].Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Fatalf("served certificate not trusted by the written CA: %v", err)
	}
}

func TestGenerateCert(t *testing.T) {
	cert, caPEM, err := fcmemu.GenerateCert([]string{"127.0.0.1", "emu.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.VerifyHostname("emu.test"); err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(caPEM), "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("caPEM %q", caPEM[:20])
	}
}

func TestConnectionsCounted(t *testing.T) {
	e := fcmemu.New(fcmemu.Config{}, testLogger(t))
	base, _ := serve(t, e, fcmemu.ServerOptions{})
	noKeepAlive := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		postSend(t, noKeepAlive, base)
	}
	if got := e.Stats().ConnectionsAccepted; got != 3 {
		t.Fatalf("connections_accepted %d after 3 requests without keep-alive, want 3", got)
	}
	keepAlive := &http.Client{Transport: &http.Transport{}}
	for range 3 {
		postSend(t, keepAlive, base)
	}
	if got := e.Stats().ConnectionsAccepted; got != 4 {
		t.Fatalf("connections_accepted %d after 3 more on one kept-alive connection, want 4", got)
	}
	keepAlive.CloseIdleConnections()
	waitFor(t, "connections to close", func() bool { return e.Stats().ConnectionsOpen == 0 })
}

func TestHangReturnsWhenClientGivesUp(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Send(ctx, msg("hang-a"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Send returned after %s", d)
	}
	// The handler notices the client left and frees itself. (On a starved machine the request
	// may not even have arrived within 200 ms; then there is nothing to free.)
	waitFor(t, "the hanging handler to end", func() bool {
		s := stats(t, ts.URL)
		return s.InFlight == 0 && s.ByCode["CANCELED"] == s.Requests
	})
}

// giveUpWhileInFlight sends token and cancels the send once the emulator holds the request, so
// the test does not depend on how fast a loaded machine delivers it.
func giveUpWhileInFlight(t *testing.T, c *messaging.Client, baseURL, token string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, msg(token))
		errc <- err
	}()
	// Wait until the request is counted for its token, not just accepted:
	// a cancel before the body is read would leave the attempt uncounted.
	waitFor(t, "the request to arrive", func() bool {
		return stats(t, baseURL).InFlight == 1 && tokenAttempts(t, baseURL, token) == 1
	})
	cancel()
	return receive(t, "Send to return after its context was canceled", errc)
}

func tokenAttempts(t *testing.T, baseURL, token string) int64 {
	t.Helper()
	resp, err := http.Get(baseURL + "/emulator/counts?token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Tokens map[string]fcmemu.TokenCounts `json:"tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Tokens[token].Attempts
}

func TestFlakyHangThenSuccess(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	if err := giveUpWhileInFlight(t, c, ts.URL, "flaky1xhang-a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("attempt 1: %v", err)
	}
	if _, err := send(t, c, "flaky1xhang-a"); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
}

func TestLatencyHonoursClientCancel(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{Latency: time.Minute})
	c := sdkClient(t, ts.URL)
	if err := giveUpWhileInFlight(t, c, ts.URL, "slow"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	waitFor(t, "the waiting handler to end", func() bool {
		s := stats(t, ts.URL)
		return s.InFlight == 0 && s.ByCode["CANCELED"] == 1
	})
}

// Shutdown releases hanging requests (503) instead of waiting for them.
func TestServeShutdownReleasesHangs(t *testing.T) {
	t.Parallel()
	e := fcmemu.New(fcmemu.Config{}, testLogger(t))
	base, stop := serve(t, e, fcmemu.ServerOptions{ShutdownTimeout: 5 * time.Second})
	status := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+"/v1/projects/p/messages:send", "application/json",
			strings.NewReader(`{"message":{"token":"hang-c"}}`))
		if err != nil {
			status <- -1
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitFor(t, "the request to hang", func() bool { return e.Stats().InFlight == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if got := receive(t, "the hanging request's answer after shutdown", status); got != 503 {
		t.Fatalf("hanging request got %d, want 503", got)
	}
}

func TestNewServerRejectsUnknownMode(t *testing.T) {
	e := fcmemu.New(fcmemu.Config{}, nil)
	if _, err := e.NewServer("127.0.0.1:0", fcmemu.ServerOptions{Mode: "spdy"}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}
