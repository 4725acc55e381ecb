package fcm

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
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

// h1Client is a direct Client over pushfan's HTTP/1.1 client to base.
func h1Client(t *testing.T, base string, conc int) *Client {
	t.Helper()
	c, err := New(context.Background(), Options{Endpoint: base + "/v1", ProjectID: "h1", Concurrency: conc})
	if err != nil {
		t.Fatal(err)
	}
	if c.direct == nil || c.direct.h1 == nil {
		t.Fatal("the direct client has no HTTP/1.1 client")
	}
	t.Cleanup(c.Close)
	return c
}

// Connections follow the sends in flight: 250 at once open at most 250,
// and after a round that opened 250 a second round opens none. (On a
// loaded machine the first round's goroutines may not all be in flight at
// once: sends that start late reuse connections that answered, and the
// second round may then open the rest, still never past 250.)
func TestH1ClientConnectionsFollowSendsInFlight(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{Latency: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	srv, conns := plainServer(t, emu.Handler())
	c := h1Client(t, srv.URL, 1000)
	p, err := c.Prepare(&fanout.Message{Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var first int64
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
		if round == 0 {
			first = conns.Load()
		}
	}
	n := conns.Load()
	if first > 250 || n > 250 || (first == 250 && n != first) {
		t.Fatalf("%d connections for 250 sends at once, %d after a second round", first, n)
	}
	if d := c.direct.h1.dials.Load(); d != n {
		t.Fatalf("%d dials for %d connections", d, n)
	}
}

// A send whose context ends gives up its connection (an answer may still
// come on it); the next send works on another.
func TestH1ClientTimeoutDropsTheConnection(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{HangMax: 30 * time.Second}, slog.New(slog.DiscardHandler))
	srv, conns := plainServer(t, emu.Handler())
	c := h1Client(t, srv.URL, 4)
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
	for i := range 3 {
		if out := send(t, c, &fanout.Message{Body: "x"}, "ok-after-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatalf("after the timeout: %+v", out)
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
	srv, conns := plainServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case contains(body, "chunked"):
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":503,`)
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, `"message":"later","status":"UNAVAILABLE"}}`)
		case contains(body, "close"):
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/closed"}`)
		case contains(body, "long"):
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/long"}`+string(make([]byte, 2*maxSuccessBody)))
		default:
			_, _ = io.WriteString(w, `{"name":"projects/h1/messages/1"}`)
		}
	}))
	c := h1Client(t, srv.URL, 4)
	ref, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h1", Concurrency: 4, HTTP2: HTTP2NetHTTP})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want := send(t, ref, &fanout.Message{Body: "x"}, "chunked", fanout.Budget{Max: 1})
	conns.Store(0)
	out := send(t, c, &fanout.Message{Body: "x"}, "chunked", fanout.Budget{Max: 1})
	if out != want || out.Class != fanout.Transient || out.Detail != "later" {
		t.Fatalf("chunked 503: %+v, net/http's: %+v", out, want)
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok", fanout.Budget{Max: 1}); out.MessageID != "projects/h1/messages/1" {
		t.Fatalf("after the chunked answer: %+v", out)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections after a chunked answer, want it reused", n)
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "close", fanout.Budget{Max: 1}); out.MessageID != "projects/h1/messages/closed" {
		t.Fatalf("Connection: close: %+v", out)
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "long", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("long answer: %+v", out)
	}
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("after the long answer: %+v", out)
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
	c, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h1", Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if out := send(t, c, &fanout.Message{Body: "x"}, "ok-"+strconv.Itoa(i), fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatal(out)
		}
	}
	c.Close()
	srv.CloseClientConnections()
	noGoroutinesLeft(t, before)
}
