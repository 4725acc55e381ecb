package transport

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fcmemu"
)

// h2Client is a Client over the HTTP/2 client to base (https://).
func h2Client(t *testing.T, base, ca string, conc int) *Client[answer] {
	t.Helper()
	c, _ := newClient(t, base, ca, conc, nil)
	if c.h2 == nil || c.Carrier() != "h2" {
		t.Fatal("the client has no HTTP/2 client")
	}
	return c
}

// Sequential requests share one connection: one dial.
func TestH2ClientSendsSequentialRequestsOnOneConnection(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 4)
	for i := range 5 {
		if a := send(c, fcmBody("ok-"+strconv.Itoa(i))); !a.ok() {
			t.Fatalf("send %d: %+v", i, a)
		}
	}
	if n := c.h2.dials.Load(); n != 1 {
		t.Fatalf("%d dials for sequential sends, want 1", n)
	}
}

// Requests in flight fill a connection's 100 streams before another is
// dialled.
func TestH2ClientOpensAConnectionPerHundredStreams(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{Latency: 20 * time.Millisecond}, slog.New(slog.DiscardHandler))
	// Each round's 250 requests are held until all of them are in flight,
	// so that the count does not depend on how fast a loaded machine
	// starts 250 goroutines (with the latency alone, the first sends could
	// end before the last began, and fewer connections were needed).
	rounds := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var arrived atomic.Int64
	h := emu.Handler()
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := arrived.Add(1)
		if round := (k - 1) / 250; round < int64(len(rounds)) {
			if k%250 == 0 {
				close(rounds[round])
			}
			select {
			case <-rounds[round]:
			case <-time.After(10 * time.Second): // the sends' own deadline fails the test
			}
		}
		h.ServeHTTP(w, r)
	})
	srv, ca, conns := tlsEmulator(t, held, true)
	c := h2Client(t, srv.URL, ca, 1000)
	for round := range 2 {
		sendRound(t, c, round, 250)
	}
	// 250 at once need three connections, and the second round reuses them.
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 250 sends at once, want 3", n)
	}
}

// A body bigger than the stream and connection windows is sent as the
// server opens them, and an answer bigger than MaxErrorBody is read to its
// end and kept to MaxErrorBody, as net/http's path reads it.
func TestH2ClientFlowControl(t *testing.T) {
	var got atomic.Int64
	big := strings.Repeat("e", 3*MaxErrorBody)
	srv, ca, _ := tlsEmulator(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, big)
	}), true)
	body := []byte(strings.Repeat("b", 300<<10))
	c := h2Client(t, srv.URL, ca, 4)
	d := send(c, body)
	want := got.Load()
	if want != 300<<10 {
		t.Fatalf("the server read %d bytes", want)
	}
	nh, _ := newClient(t, srv.URL, ca, 4, func(o *Options) { o.NetHTTP = true })
	n := send(nh, body)
	if got.Load() != want {
		t.Fatalf("net/http sent %d bytes, the HTTP/2 client %d", got.Load(), want)
	}
	if d.Err != nil || n.Err != nil || d.Status != n.Status || d.Header.Get("Retry-After") != n.Header.Get("Retry-After") ||
		string(d.Body) != string(n.Body) || len(d.Body) != MaxErrorBody {
		t.Fatalf("h2 %d/%q/%d bytes (%v), net/http %d/%q/%d bytes (%v)", d.Status, d.Header.Get("Retry-After"), len(d.Body), d.Err,
			n.Status, n.Header.Get("Retry-After"), len(n.Body), n.Err)
	}
}

// The request's context bounds it: a hanging answer is a timeout, the
// stream is reset, and the connection goes on carrying requests.
func TestH2ClientTimeoutResetsTheStream(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, conns := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 4)
	if a := sendWithin(c, fcmBody("hang-1"), 200*time.Millisecond); !a.timeout() {
		t.Fatalf("hang: %+v, want a timeout", a)
	}
	if a := send(c, fcmBody("ok-after")); !a.ok() {
		t.Fatalf("after the timeout: %+v", a)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one", n)
	}
	// The hanging handler ends when the reset reaches the server.
	waitUntil(t, "the server to see the reset", func() bool { return emu.Stats().InFlight == 0 })
}

// A server going away (GOAWAY, here a graceful shutdown) lets the streams
// it took finish; the connection is let go, and a request after it is a
// network error (fcm's engine sends it again), not a hang.
func TestH2ClientGoAway(t *testing.T) {
	// Long enough for all 20 to be in flight at once on a loaded machine.
	emu := fcmemu.New(fcmemu.Config{Latency: 3 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 100)
	var wg sync.WaitGroup
	outs := make([]answer, 20)
	for i := range outs {
		wg.Go(func() { outs[i] = sendWithin(c, fcmBody("ok-"+strconv.Itoa(i)), 10*time.Second) })
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, a := range outs {
		if !a.ok() {
			t.Fatalf("send %d: %+v", i, a)
		}
	}
	waitUntil(t, "the client to let the connection go", func() bool { return c.h2.openConns() == 0 })
	if a := send(c, fcmBody("ok-next")); !a.network() {
		t.Fatalf("after GOAWAY: %+v", a)
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

// A connection cut with requests in flight fails them as network errors
// (fcm's engine sends them again); the next requests dial again. No
// request is left without a Result, and none is reported answered that
// the server did not answer.
func TestH2ClientConnectionCut(t *testing.T) {
	// Hanging tokens: every request is still in flight when the cut comes.
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	proxy := newCutProxy(t, srv.Listener.Addr().String())
	before := runtime.NumGoroutine()
	c, closeAll := newClient(t, "https://"+proxy.ln.Addr().String(), ca, 300, nil)
	var wg sync.WaitGroup
	outs := make([]answer, 250)
	for i := range outs {
		wg.Go(func() { outs[i] = sendWithin(c, fcmBody("hang-cut-"+strconv.Itoa(i)), 10*time.Second) })
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 250 })
	proxy.cut()
	wg.Wait()
	// An idle connection learns of the cut from its own read, which may
	// come after the requests on the others failed (a request on it
	// meanwhile fails as a network error, and is sent again).
	waitUntil(t, "the client to let every cut connection go", func() bool { return c.h2.openConns() == 0 })
	for i, a := range outs {
		if !a.network() {
			t.Fatalf("send %d: %+v, want a network error", i, a)
		}
	}
	for i := range outs {
		if a := send(c, fcmBody("ok-cut-"+strconv.Itoa(i))); !a.ok() {
			t.Fatalf("resend %d: %+v", i, a)
		}
	}
	closeAll()
	noGoroutinesLeft(t, before)
}

// Close ends every goroutine of the client, requests in flight included.
func TestH2ClientCloseEndsItsGoroutines(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), true)
	before := runtime.NumGoroutine()
	c, closeAll := newClient(t, srv.URL, ca, 300, nil)
	var wg sync.WaitGroup
	outs := make([]answer, 150)
	for i := range outs {
		wg.Go(func() { outs[i] = sendWithin(c, fcmBody("hang-"+strconv.Itoa(i)), 20*time.Second) })
	}
	waitUntil(t, "the sends to reach the server", func() bool { return emu.Stats().InFlight == 150 })
	closeAll()
	wg.Wait()
	for i, a := range outs {
		if !a.network() {
			t.Fatalf("send %d: %+v", i, a)
		}
	}
	if a := send(c, fcmBody("ok-closed")); !a.network() {
		t.Fatalf("a send after Close: %+v", a)
	}
	closeAll() // twice is fine
	noGoroutinesLeft(t, before)
}

// A server that does not speak HTTP/2 over TLS gets the requests over
// Fallback (net/http's HTTP/1.1).
func TestH2ClientFallsBackToHTTP1(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, ca, _ := tlsEmulator(t, emu.Handler(), false)
	c := h2Client(t, srv.URL, ca, 4)
	for i := range 3 {
		if a := send(c, fcmBody("ok-"+strconv.Itoa(i))); !a.ok() {
			t.Fatalf("send %d: %+v", i, a)
		}
	}
	if !c.h2.noH2.Load() || c.h2.dials.Load() != 1 || c.Carrier() != "net/http" {
		t.Fatalf("noH2 %v after %d dials, carried by %s", c.h2.noH2.Load(), c.h2.dials.Load(), c.Carrier())
	}
}

// Through an HTTPS proxy the client opens a CONNECT tunnel, as net/http
// does for http.ProxyFromEnvironment, and speaks TLS + HTTP/2 inside it;
// the headers the authenticated transport adds are sent.
func TestH2ClientThroughAProxyWithAuth(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rh := &recordHeaders{h: emu.Handler(), header: map[string]http.Header{}}
	srv, ca, _ := tlsEmulator(t, rh, true)
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
	var tokens atomic.Int64
	c, _ := newClient(t, srv.URL, ca, 4, func(o *Options) {
		o.Auth = addBearer{base: HeaderRecorder(http.DefaultTransport), n: &tokens}
	})
	proxyURL, _ := url.Parse(proxy.URL)
	c.h2.dialer.proxy = http.ProxyURL(proxyURL)
	for i := range 3 {
		tok := "ok-proxy-" + strconv.Itoa(i)
		if a := send(c, fcmBody(tok)); !a.ok() {
			t.Fatalf("through the proxy: %+v", a)
		}
		if h := rh.take(tok); h.Get("Authorization") != "Bearer t1" || h.Get("Content-Type") != "application/json" {
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

// A connection whose stream ids run out takes no more streams: it
// finishes the ones it has, closes, and the next request dials anew.
func TestH2ClientStreamIDsRunOut(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, ca, conns := tlsEmulator(t, emu.Handler(), true)
	c := h2Client(t, srv.URL, ca, 4)
	if a := send(c, fcmBody("ok-1")); !a.ok() {
		t.Fatalf("first send: %+v", a)
	}
	pool := c.h2
	pool.mu.Lock()
	conn := pool.conns[0]
	pool.mu.Unlock()
	conn.mu.Lock()
	conn.nextID = lastStreamID - 2 // odd, like every client stream id
	conn.mu.Unlock()
	for i := range 3 {
		if a := send(c, fcmBody("ok-id-"+strconv.Itoa(i))); !a.ok() {
			t.Fatalf("send %d: %+v", i, a)
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
	c := h2Client(t, srv.URL, caFile(t, srv), 100)
	// One request first: the server's SETTINGS arrive with its answer.
	if a := send(c, fcmBody("ok-first")); !a.ok() {
		t.Fatalf("first send: %+v", a)
	}
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Go(func() {
			if a := sendWithin(c, fcmBody("ok-"+strconv.Itoa(i)), 10*time.Second); !a.ok() {
				t.Error(a)
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 25 sends at 10 streams each, want 3 (limit %d, dials %d, max in flight %d)", n, c.h2.streamLimit.Load(), c.h2.dials.Load(), emu.Stats().MaxInFlight)
	}
}
