package transport

import (
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/fcmemu"
)

// h1Client is a Client over the HTTP/1.1 client to base (http://).
func h1Client(t *testing.T, base string, conc int) *Client[answer] {
	t.Helper()
	c, _ := newClient(t, base, "", conc, nil)
	if c.h1 == nil || c.Carrier() != "h1" {
		t.Fatal("the client has no HTTP/1.1 client")
	}
	return c
}

// Connections follow the requests in flight: 250 at once open at most
// 250, and after a round that opened 250 a second round opens none. (On a
// loaded machine the first round's goroutines may not all be in flight at
// once: requests that start late reuse connections that answered, and the
// second round may then open the rest, still never past 250.)
func TestH1ClientConnectionsFollowSendsInFlight(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{Latency: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	srv, conns := plainServer(t, emu.Handler())
	c := h1Client(t, srv.URL, 1000)
	var first int64
	for round := range 2 {
		sendRound(t, c, round, 250)
		if round == 0 {
			first = conns.Load()
		}
	}
	n := conns.Load()
	if first > 250 || n > 250 || (first == 250 && n != first) {
		t.Fatalf("%d connections for 250 sends at once, %d after a second round", first, n)
	}
	if d := c.h1.dials.Load(); d != n {
		t.Fatalf("%d dials for %d connections", d, n)
	}
}

// A request whose context ends gives up its connection (an answer may
// still come on it); the next request works on another.
func TestH1ClientTimeoutDropsTheConnection(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, conns := plainServer(t, emu.Handler())
	c := h1Client(t, srv.URL, 4)
	if a := sendWithin(c, fcmBody("hang-1"), 200*time.Millisecond); !a.timeout() {
		t.Fatalf("hang: %+v, want a timeout", a)
	}
	for i := range 3 {
		if a := send(c, fcmBody("ok-after-"+strconv.Itoa(i))); !a.ok() {
			t.Fatalf("after the timeout: %+v", a)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want the hung one and one more", n)
	}
}

// Answers framed every way HTTP/1.1 allows read as net/http reads them: a
// chunked error answer with Retry-After, an answer that closes the
// connection, and one longer than is kept.
func TestH1ClientReadsEveryFraming(t *testing.T) {
	const chunked503 = `{"error":{"code":503,"message":"later","status":"UNAVAILABLE"}}`
	srv, conns := plainServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case contains(body, "chunked"):
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, chunked503[:21])
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, chunked503[21:])
		case contains(body, "close"):
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/closed"}`)
		case contains(body, "long"):
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/long"}`+string(make([]byte, 2*MaxSuccessBody)))
		default:
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/1"}`)
		}
	}))
	c := h1Client(t, srv.URL, 4)
	ref, _ := newClient(t, srv.URL, "", 4, func(o *Options) { o.NetHTTP = true })
	want := send(ref, fcmBody("chunked"))
	conns.Store(0)
	a := send(c, fcmBody("chunked"))
	if a.Err != nil || want.Err != nil || a.Status != want.Status || a.Header.Get("Retry-After") != want.Header.Get("Retry-After") ||
		string(a.Body) != string(want.Body) || a.Status != http.StatusServiceUnavailable || string(a.Body) != chunked503 {
		t.Fatalf("chunked 503: %+v, net/http's: %+v", a, want)
	}
	if a := send(c, fcmBody("ok")); string(a.Body) != `{"name":"projects/h1/messages/1"}` {
		t.Fatalf("after the chunked answer: %+v", a)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections after a chunked answer, want it reused", n)
	}
	if a := send(c, fcmBody("close")); string(a.Body) != `{"name":"projects/h1/messages/closed"}` {
		t.Fatalf("Connection: close: %+v", a)
	}
	if a := send(c, fcmBody("long")); !a.ok() || len(a.Body) != MaxSuccessBody {
		t.Fatalf("long answer: %+v", a)
	}
	if a := send(c, fcmBody("ok")); !a.ok() {
		t.Fatalf("after the long answer: %+v", a)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (closed by the server, then not read to its end)", n)
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// Close closes the connections and returns with no goroutine left.
func TestH1ClientCloseEndsItsGoroutines(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv, _ := plainServer(t, emu.Handler())
	before := runtime.NumGoroutine()
	c, closeAll := newClient(t, srv.URL, "", 8, nil)
	for i := range 8 {
		if a := send(c, fcmBody("ok-"+strconv.Itoa(i))); !a.ok() {
			t.Fatal(a)
		}
	}
	closeAll()
	srv.CloseClientConnections()
	noGoroutinesLeft(t, before)
}
