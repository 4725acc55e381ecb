package transport

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answer is what the tests' clients finish a Result into: the Result, and
// whether the request's context had ended (as fcm classifies: an error
// then is a timeout, otherwise the network's).
type answer struct {
	Result
	ctxEnded bool
}

func finish(ctx context.Context, r Result) answer { return answer{r, ctx.Err() != nil} }

// ok: answered 2xx.
func (a answer) ok() bool { return a.Err == nil && a.Status >= 200 && a.Status < 300 }

// network: no answer, the network's doing (fcm: a network error).
func (a answer) network() bool { return a.Err != nil && !a.ctxEnded }

// timeout: no answer, the context's doing (fcm: a timeout).
func (a answer) timeout() bool { return a.Err != nil && a.ctxEnded }

// testHeader is every test request's header set (fcm's direct client
// sends these and the SDK's).
func testHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Format-Version": {"2"}}
}

// fcmBody is a request body the emulator takes, for token.
func fcmBody(token string) []byte {
	b, _ := json.Marshal(map[string]any{"message": map[string]any{"token": token, "notification": map[string]string{"body": "x"}}})
	return b
}

// newClient is a Client to base's emulator path, made as fcm makes it:
// over HTTP/2 to an https:// base, HTTP/1.1 to an http:// one, with a
// ConnPool of net/http transports (trusting ca, "" for none) as its
// Fallback. mod, when not nil, changes the options first. The client and
// its pool are closed at the test's end, or by the func returned.
func newClient(t *testing.T, base, ca string, conc int, mod func(*Options)) (*Client[answer], func()) {
	t.Helper()
	plain, err := NewHTTPTransport(ca, false, conc)
	if err != nil {
		t.Fatal(err)
	}
	h2 := strings.HasPrefix(base, "https://")
	pool := NewConnPool(plain, max(conc, 1), h2)
	o := Options{
		URL: base + "/v1/projects/p/messages:send", Header: testHeader(), TLS: plain.TLSClientConfig,
		HTTP2: h2, Fallback: &http.Client{Transport: pool}, Concurrency: conc,
	}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o, finish)
	if err != nil {
		t.Fatal(err)
	}
	closeAll := func() { c.Close(); pool.CloseIdleConnections() }
	t.Cleanup(closeAll)
	return c, closeAll
}

// send makes one request of body under a 5 s timeout.
func send(c *Client[answer], body []byte) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Start(ctx, body).Wait(ctx)
}

// sendRound makes n requests at once (round names their tokens) and
// fails the test unless every one succeeds.
func sendRound(t *testing.T, c *Client[answer], round, n int) {
	t.Helper()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range n {
		wg.Go(func() {
			if a := sendWithin(c, fcmBody("ok-"+strconv.Itoa(round)+"-"+strconv.Itoa(i)), 10*time.Second); a.ok() {
				ok.Add(1)
			} else {
				t.Error(a)
			}
		})
	}
	wg.Wait()
	if ok.Load() != int64(n) {
		t.Fatalf("round %d: %d of %d succeeded", round, ok.Load(), n)
	}
}

// sendWithin makes one request of body under timeout d.
func sendWithin(c *Client[answer], body []byte, d time.Duration) answer {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Start(ctx, body).Wait(ctx)
}

// tlsEmulator serves h over TLS (HTTP/2 when h2) and returns the server,
// a CA file that trusts it, and the count of connections it accepted.
func tlsEmulator(t *testing.T, h http.Handler, h2 bool) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = h2
	// 100 streams a connection, as FCM and fcmemu advertise (net/http's
	// own default is 250, which let a connection take every send of a
	// round of 250 once its SETTINGS had arrived).
	srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, caFile(t, srv), &conns
}

// caFile is a PEM file of srv's certificate.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// plainServer is an HTTP/1.1 server counting the connections it accepts.
func plainServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// recordHeaders wraps h and keeps the last request's headers per token.
type recordHeaders struct {
	h      http.Handler
	mu     sync.Mutex
	header map[string]http.Header
}

func (rh *recordHeaders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	var req struct {
		Message struct {
			Token string `json:"token"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &req)
	rh.mu.Lock()
	rh.header[req.Message.Token] = r.Header.Clone()
	rh.mu.Unlock()
	rh.h.ServeHTTP(w, r)
}

func (rh *recordHeaders) take(tok string) http.Header {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	h := rh.header[tok]
	delete(rh.header, tok)
	return h
}

// noGoroutinesLeft waits (with a deadline) for the goroutine count to come
// back to before.
func noGoroutinesLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntil polls cond until it holds, or fails the test after a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
