package transport

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tlsServer answers every request after 50 ms, over HTTP/2 when h2, and
// counts the connections it accepted.
func tlsServer(t *testing.T, h2 bool) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = h2
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func poolFor(srv *httptest.Server, concurrency int) *ConnPool {
	base := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConnsPerHost: concurrency,
		TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}
	return NewConnPool(base, concurrency, true)
}

// burst sends n requests at once through rt and returns the protocols
// they were answered in.
func burst(t *testing.T, rt http.RoundTripper, url string, n int) map[string]int {
	var mu sync.Mutex
	protos := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, url, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			protos[string(body)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return protos
}

// 450 requests at once over HTTP/2 take five connections of 100 streams,
// not one each.
func TestConnPoolOpensAConnectionPerHundredStreams(t *testing.T) {
	srv, conns := tlsServer(t, true)
	p := poolFor(srv, 4096)
	defer p.CloseIdleConnections()
	if protos := burst(t, p, srv.URL, 450); protos["HTTP/2.0"] != 450 {
		t.Fatalf("answers by protocol %v, want 450 over HTTP/2", protos)
	}
	if got := conns.Load(); got != 5 {
		t.Fatalf("%d connections for 450 concurrent requests, want 5 (100 streams each)", got)
	}
	// Again, on the connections already open.
	burst(t, p, srv.URL, 450)
	if got := conns.Load(); got != 5 || len(p.conns) != 5 {
		t.Fatalf("%d connections (pool %d) after a second burst, want the same 5", got, len(p.conns))
	}
}

// A server that answers HTTP/1.1 gets a connection a request again, not
// every request queued on one connection.
func TestConnPoolFallsBackToHTTP1(t *testing.T) {
	srv, conns := tlsServer(t, false)
	p := poolFor(srv, 64)
	defer p.CloseIdleConnections()
	burst(t, p, srv.URL, 1) // learns the protocol
	start := time.Now()
	if protos := burst(t, p, srv.URL, 50); protos["HTTP/1.1"] != 50 {
		t.Fatalf("answers by protocol %v, want 50 over HTTP/1.1", protos)
	}
	if !p.http1.Load() || conns.Load() < 10 {
		t.Fatalf("after HTTP/1.1 answers: fallback %v, %d connections for 50 concurrent requests", p.http1.Load(), conns.Load())
	}
	t.Logf("50 concurrent HTTP/1.1 requests of 50 ms each took %v on %d connections", time.Since(start).Round(time.Millisecond), conns.Load())
}
