package fcm

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/fcmemu"
)

// tlsEmulator serves h over TLS (HTTP/2 when h2) and returns the server,
// a CA file that trusts it, and the count of connections it accepted.
func tlsEmulator(t *testing.T, h http.Handler, h2 bool) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = h2
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca, &conns
}

// h2Client is a direct Client over pushfan's HTTP/2 client to srv.
func h2Client(t *testing.T, base, ca string, conc int) *Client {
	t.Helper()
	c, err := New(context.Background(), Options{Endpoint: base + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: conc})
	if err != nil {
		t.Fatal(err)
	}
	if c.direct == nil || c.direct.h2 == nil {
		t.Fatal("the direct client has no HTTP/2 client")
	}
	t.Cleanup(c.Close)
	return c
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

// Over TLS + HTTP/2, pushfan's HTTP/2 client sends the SDK's request byte
// for byte with the SDK's headers, and every answer the emulator can give
// classifies as the SDK's does over net/http.
func TestH2ClientMatchesTheSDK(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rb := &recordBodies{h: emu.Handler(), bodies: map[string][]byte{}, header: map[string]http.Header{}}
	srv, ca, _ := tlsEmulator(t, rb, true)
	sdk, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: 4, Client: ClientSDK})
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	direct := h2Client(t, srv.URL, ca, 4)

	plain := &fanout.Message{Title: "Hi \"you\" <b>&</b>", Body: "ünïcødé ✓", Data: map[string]string{"k": "v"}, Delivery: fanout.Delivery{DisplayTag: "pushfan-7"}}
	reserved := &fanout.Message{Body: "x", Data: map[string]string{"from": "nope"}}
	dry := &fanout.Message{Body: "dry", DryRun: true, Platform: samplePlatform()}
	cases := []struct {
		msg   *fanout.Message
		token string
	}{
		{plain, "ok-1"}, {dry, "ok-2"}, {plain, "unregistered-1"}, {plain, "mismatch-1"}, {plain, "invalid-1"},
		{reserved, "ok-3"}, {plain, "quota-1"}, {plain, "unavailable-1"}, {plain, "internal-1"}, {plain, "auth-1"},
		{plain, "ok-\"quoted\"-<tag>&"},
	}
	for _, tc := range cases {
		s := send(t, sdk, tc.msg, tc.token, fanout.Budget{Max: 1})
		sb, sh := rb.take(tc.token)
		d := send(t, direct, tc.msg, tc.token, fanout.Budget{Max: 1})
		db, dh := rb.take(tc.token)
		if d.Class != s.Class || d.Code != s.Code || d.RetryAfter != s.RetryAfter || d.Requests != 1 {
			t.Fatalf("%s: h2 %+v, SDK %+v", tc.token, d, s)
		}
		if (d.MessageID != "") != (s.Class == fanout.Success) || (s.Class == fanout.Success && !strings.HasPrefix(d.MessageID, "projects/h2/messages/")) {
			t.Fatalf("%s: message id %q for %v", tc.token, d.MessageID, d.Class)
		}
		if len(sb) == 0 || !bytes.Equal(sb, db) {
			t.Fatalf("%s: bodies differ:\n sdk: %s\n h2:  %s", tc.token, sb, db)
		}
		for _, k := range []string{"Content-Type", "X-Goog-Api-Format-Version", "X-Firebase-Client", "X-Goog-Api-Client", "User-Agent", "Content-Length"} {
			if sh.Get(k) == "" || sh.Get(k) != dh.Get(k) {
				t.Fatalf("%s: header %s: sdk %q, h2 %q", tc.token, k, sh.Get(k), dh.Get(k))
			}
		}
	}
	if n := direct.direct.h2.dials.Load(); n != 1 {
		t.Fatalf("%d dials for sequential sends, want 1", n)
	}
}

// Sends in flight fill a connection's 100 streams before another is
// dialled.
func TestH2ClientOpensAConnectionPerHundredStreams(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{Latency: 200 * time.Millisecond}, slog.New(slog.DiscardHandler))
	srv, ca, conns := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 1000)
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		var wg sync.WaitGroup
		var ok atomic.Int64
		for i := range 250 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if out := p.Send(ctx, "ok-"+strconv.Itoa(round)+"-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class == fanout.Success {
					ok.Add(1)
				} else {
					t.Error(out)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 250 {
			t.Fatalf("round %d: %d of 250 succeeded", round, ok.Load())
		}
	}
	// 250 at once need three connections, and the second round reuses them.
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 250 sends at once, want 3", n)
	}
}

// A body bigger than the stream and connection windows is sent as the
// server opens them, and an answer bigger than maxErrorBody is read to its
// end and kept to maxErrorBody, as net/http's path reads it.
func TestH2ClientFlowControl(t *testing.T) {
	var got atomic.Int64
	big := strings.Repeat("e", 3*maxErrorBody)
	srv, ca, _ := tlsEmulator(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, big)
	}), true)
	msg := &fanout.Message{Body: strings.Repeat("b", 300<<10)}
	c := h2Client(t, srv.URL, ca, 4)
	d := send(t, c, msg, "ok-1", fanout.Budget{Max: 1})
	want := got.Load()
	if want < 300<<10 {
		t.Fatalf("the server read %d bytes", want)
	}
	nh, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: 4, HTTP2: HTTP2NetHTTP})
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	n := send(t, nh, msg, "ok-1", fanout.Budget{Max: 1})
	if got.Load() != want {
		t.Fatalf("net/http sent %d bytes, the HTTP/2 client %d", got.Load(), want)
	}
	if d.Class != n.Class || d.Code != n.Code || d.RetryAfter != n.RetryAfter || d.Detail != n.Detail || len(d.Detail) < maxErrorBody {
		t.Fatalf("h2 %v/%s/%v, net/http %v/%s/%v", d.Class, d.Code, d.RetryAfter, n.Class, n.Code, n.RetryAfter)
	}
}

// The send's context bounds it: a hanging answer is a timeout, the stream
// is reset, and the connection goes on carrying sends.
func TestH2ClientTimeoutResetsTheStream(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, conns := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 4)
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	out := p.Send(ctx, "hang-1", fanout.Budget{Max: 1})
	cancel()
	if out.Class != fanout.Transient || out.Code != fanout.CodeTimeout {
		t.Fatalf("hang: %+v, want a timeout", out)
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-after", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("after the timeout: %+v", out)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one", n)
	}
	// The hanging handler ends when the reset reaches the server.
	waitUntil(t, "the server to see the reset", func() bool { return emu.Stats().InFlight == 0 })
}

// A server going away (GOAWAY, here a graceful shutdown) lets the streams
// it took finish; the connection is let go, and a send after it is a
// network error (the engine sends it again), not a hang.
func TestH2ClientGoAway(t *testing.T) {
	// Long enough for all 20 to be in flight at once on a loaded machine.
	emu := fcmemu.New(fcmemu.Config{Latency: 3 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 100)
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]fanout.Outcome, 20)
	for i := range outs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			outs[i] = p.Send(ctx, "ok-"+strconv.Itoa(i), fanout.Budget{Max: 1})
		})
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, out := range outs {
		if out.Class != fanout.Success {
			t.Fatalf("send %d: %+v", i, out)
		}
	}
	waitUntil(t, "the client to let the connection go", func() bool { return c.direct.h2.openConns() == 0 })
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-next", fanout.Budget{Max: 1}); out.Class != fanout.Transient || out.Code != CodeNetwork {
		t.Fatalf("after GOAWAY: %+v", out)
	}
}

// cutProxy forwards TCP to target and cuts every connection on cut.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	target string
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A connection cut with sends in flight fails them as network errors (the
// engine sends them again); the next sends dial again. No send is left
// without an outcome, and no success is reported that the server did not
// accept.
func TestH2ClientConnectionCut(t *testing.T) {
	// Hanging tokens: every send is still in flight when the cut comes.
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	proxy := newCutProxy(t, srv.Listener.Addr().String())
	before := runtime.NumGoroutine()
	c, err := New(context.Background(), Options{Endpoint: "https://" + proxy.ln.Addr().String() + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: 300})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]fanout.Outcome, 250)
	for i := range outs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			outs[i] = p.Send(ctx, "hang-cut-"+strconv.Itoa(i), fanout.Budget{Max: 1})
		})
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 250 })
	proxy.cut()
	wg.Wait()
	// An idle connection learns of the cut from its own read, which may
	// come after the sends on the others failed (a send on it meanwhile
	// fails as a network error, and the engine sends it again).
	waitUntil(t, "the client to let every cut connection go", func() bool { return c.direct.h2.openConns() == 0 })
	for i, out := range outs {
		if out.Class != fanout.Transient || out.Code != CodeNetwork {
			t.Fatalf("send %d: %+v, want a network error", i, out)
		}
	}
	for i := range outs {
		if out := send(t, c, &fanout.Message{Body: "x"}, "ok-cut-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatalf("resend %d: %+v", i, out)
		}
	}
	c.Close()
	noGoroutinesLeft(t, before)
}

// Close ends every goroutine of the client, sends in flight included.
func TestH2ClientCloseEndsItsGoroutines(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	before := runtime.NumGoroutine()
	c, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: 300})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]fanout.Outcome, 150)
	for i := range outs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			outs[i] = p.Send(ctx, "hang-"+strconv.Itoa(i), fanout.Budget{Max: 1})
		})
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 150 })
	c.Close()
	wg.Wait()
	for i, out := range outs {
		if out.Class != fanout.Transient || out.Code != CodeNetwork {
			t.Fatalf("send %d: %+v", i, out)
		}
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-closed", fanout.Budget{Max: 1}); out.Code != CodeNetwork {
		t.Fatalf("a send after Close: %+v", out)
	}
	c.Close() // twice is fine
	noGoroutinesLeft(t, before)
}

// A server that does not speak HTTP/2 over TLS gets the sends over
// net/http's HTTP/1.1.
func TestH2ClientFallsBackToHTTP1(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), false)
	c := h2Client(t, srv.URL, ca, 4)
	for i := range 3 {
		if out := send(t, c, &fanout.Message{Body: "x"}, "ok-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success || out.Requests != 1 {
			t.Fatalf("send %d: %+v", i, out)
		}
	}
	if !c.direct.h2.noH2.Load() || c.direct.h2.dials.Load() != 1 {
		t.Fatalf("noH2 %v after %d dials", c.direct.h2.noH2.Load(), c.direct.h2.dials.Load())
	}
}

// Through an HTTPS proxy the client opens a CONNECT tunnel, as net/http
// does for http.ProxyFromEnvironment, and speaks TLS + HTTP/2 inside it;
// the headers the authenticated transport adds are sent.
func TestH2ClientThroughAProxyWithAuth(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rb := &recordBodies{h: emu.Handler(), bodies: map[string][]byte{}, header: map[string]http.Header{}}
	srv, ca, _ := tlsEmulator(t, rb, true)
	var connects atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect || r.Host != srv.Listener.Addr().String() {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		connects.Add(1)
		out, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		in, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			out.Close()
			return
		}
		_, _ = io.WriteString(in, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(out, brw); out.Close() }()
		_, _ = io.Copy(in, out)
		in.Close()
	}))
	defer proxy.Close()
	c := h2Client(t, srv.URL, ca, 4)
	proxyURL, _ := url.Parse(proxy.URL)
	c.direct.h2.dialer.proxy = http.ProxyURL(proxyURL)
	var tokens atomic.Int64
	auth := &recordOrSend{send: http.DefaultTransport}
	c.direct.h2.headers = newH2Headers(c.direct.h2.headers.authURL, c.direct.header, addBearer{base: auth, n: &tokens})
	for i := range 3 {
		tok := "ok-proxy-" + strconv.Itoa(i)
		if out := send(t, c, &fanout.Message{Body: "x"}, tok, fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatalf("through the proxy: %+v", out)
		}
		if _, h := rb.take(tok); h.Get("Authorization") != "Bearer t1" || h.Get("Content-Type") != "application/json" {
			t.Fatalf("headers %v", h)
		}
	}
	if connects.Load() != 1 || tokens.Load() != 1 {
		t.Fatalf("%d CONNECTs, %d tokens taken; want 1 and 1", connects.Load(), tokens.Load())
	}
}

// addBearer stands for Google's oauth2 transport: it adds a token.
type addBearer struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (a addBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer t"+strconv.FormatInt(a.n.Add(1), 10))
	return a.base.RoundTrip(r)
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

// A connection whose stream ids run out takes no more streams: it
// finishes the ones it has, closes, and the next send dials anew.
func TestH2ClientStreamIDsRunOut(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, ca, conns := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 4)
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-1", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("first send: %+v", out)
	}
	pool := c.direct.h2
	pool.mu.Lock()
	conn := pool.conns[0]
	pool.mu.Unlock()
	conn.mu.Lock()
	conn.nextID = lastStreamID - 2 // odd, like every client stream id
	conn.mu.Unlock()
	for i := range 3 {
		if out := send(t, c, &fanout.Message{Body: "x"}, "ok-id-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatalf("send %d: %+v", i, out)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// The server's MAX_CONCURRENT_STREAMS is a connection's capacity.
func TestH2ClientFollowsTheServersStreamLimit(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{Latency: 200 * time.Millisecond}, slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(emu.Handler())
	srv.EnableHTTP2 = true
	srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 10}
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := h2Client(t, srv.URL, ca, 100)
	// One send first: the server's SETTINGS arrive with its answer.
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-first", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("first send: %+v", out)
	}
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if out := p.Send(ctx, "ok-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success {
				t.Error(out)
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 25 sends at 10 streams each, want 3 (limit %d, dials %d, max in flight %d)", n, c.direct.h2.streamLimit.Load(), c.direct.h2.dials.Load(), emu.Stats().MaxInFlight)
	}
}
