package fcmemu

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardWriter is the cheapest ResponseWriter, so the benchmark measures the emulator rather
// than httptest.ResponseRecorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }

func benchBodies(n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"message":{"token":"bench-token-%d:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx","notification":{"title":"Hello","body":"A broadcast to everyone"},"data":{"campaign":"c-42","kind":"promo"}}}`, i)
	}
	return bodies
}

// BenchmarkHandler is one send through the full handler (routing, decoding, validation,
// counting, answer), no latency, over 10k distinct tokens.
func BenchmarkHandler(b *testing.B) {
	e := New(Config{}, nil)
	h := e.Handler()
	bodies := benchBodies(10_000)
	rd := bytes.NewReader(nil)
	req := httptest.NewRequest(http.MethodPost, "/v1/projects/demo/messages:send", rd)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rd.Reset(bodies[i%len(bodies)])
		clear(w.h)
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkHandlerParallel is the same from GOMAXPROCS goroutines: what contention costs.
func BenchmarkHandlerParallel(b *testing.B) {
	e := New(Config{}, nil)
	h := e.Handler()
	bodies := benchBodies(10_000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(nil)
		req := httptest.NewRequest(http.MethodPost, "/v1/projects/demo/messages:send", rd)
		w := &discardWriter{h: http.Header{}}
		for i := 0; pb.Next(); i++ {
			rd.Reset(bodies[i%len(bodies)])
			clear(w.h)
			h.ServeHTTP(w, req)
		}
	})
}

// BenchmarkLoopbackHTTP1 is the whole round trip over a real loopback HTTP/1.1 server from
// 32×GOMAXPROCS concurrent keep-alive clients, no latency: ns/op is wall time per request with
// client and server sharing the CPUs, so 1e9/(ns/op) is the box's ceiling in requests per
// second, and cpu-ns/op what one request costs both sides together.
func BenchmarkLoopbackHTTP1(b *testing.B) {
	e := New(Config{}, nil)
	ts := httptest.NewUnstartedServer(e.Handler())
	ts.Config.ConnState = e.ConnState
	ts.Start()
	defer ts.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	url := ts.URL + "/v1/projects/demo/messages:send"
	bodies := benchBodies(10_000)
	b.ReportAllocs()
	b.SetParallelism(32) // × GOMAXPROCS goroutines
	cpu0 := processCPUSeconds()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 512)
		for i := 0; pb.Next(); i++ {
			resp, err := c.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
			if err != nil {
				b.Error(err)
				return
			}
			for {
				if _, err := resp.Body.Read(buf); err != nil {
					break
				}
			}
			resp.Body.Close()
		}
	})
	// CPU of client and server together: both live in this process.
	b.ReportMetric((processCPUSeconds()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(e.Stats().ConnectionsAccepted), "conns")
}
