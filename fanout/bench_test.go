package fanout_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pushfan/fanout"
	"pushfan/metrics"
)

// genSource pages an audience of n targets without holding it: ids 1..n,
// tokens taken round-robin from a small pre-built set, so paging allocates
// nothing per target and the benchmark measures the engine, not the source.
type genSource struct {
	n      uint64
	tokens []string
}

func newGenSource(n int) *genSource {
	s := &genSource{n: uint64(n), tokens: make([]string, 1024)}
	for i := range s.tokens {
		s.tokens[i] = fmt.Sprintf("bench-token-%06d-%s", i, "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789")
	}
	return s
}

func (s *genSource) Page(_ context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	for id := after + 1; id <= s.n && len(dst) < limit; id++ {
		dst = append(dst, fanout.Target{Cursor: id, TokenID: id, UserID: id, Token: s.tokens[id%uint64(len(s.tokens))]})
	}
	return dst, nil
}

// noopSender accepts every send at once: what is left is the engine.
type noopSender struct{}

func (noopSender) Send(context.Context, *fanout.Message, string) error { return nil }

// BenchmarkEngine runs one Job of b.N targets through the engine with a
// no-op Sender and reports the engine's own cost per message (ns/msg,
// allocs/msg, B/msg) at several worker counts. A committer goroutine calls
// Progress.Commit every 10 ms, as a chunk's checkpoint loop does, so the
// per-target page bookkeeping is released as in production. "prometheus"
// installs the service's real metrics hooks (a histogram observation and
// two counters per send).
func BenchmarkEngine(b *testing.B) {
	for _, tc := range []struct {
		workers int
		metrics bool
	}{{1, false}, {64, false}, {512, false}, {512, true}} {
		name := fmt.Sprintf("workers=%d", tc.workers)
		if tc.metrics {
			name += "/prometheus"
		}
		b.Run(name, func(b *testing.B) {
			benchEngine(b, tc.workers, tc.metrics)
		})
	}
}

func benchEngine(b *testing.B, workers int, withMetrics bool) {
	eng, err := fanout.New(fanout.Config{
		Concurrency:    workers,
		PageSize:       1000,
		SendTimeout:    10 * time.Second,
		MaxAttempts:    5,
		RetryBaseDelay: 500 * time.Millisecond,
		RetryMaxDelay:  2 * time.Minute,
	}, noopSender{}, fanout.NewThrottle(1e9, 0), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	if withMetrics {
		eng.SetMetrics(metrics.New(prometheus.NewRegistry(), nil))
	}
	msg := &fanout.Message{Title: "bench", Body: "engine overhead", CollapseKey: "pushfan-1"}
	p := &fanout.Progress{}
	src := newGenSource(b.N)

	stop := make(chan struct{})
	var committer sync.WaitGroup
	var succeeded int64 // only the committer adds, until it has stopped
	committer.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				succeeded += p.Commit(false).Succeeded
			}
		}
	})

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	err = eng.Run(context.Background(), fanout.Job{BroadcastID: 1, Message: msg, Source: src, Progress: p})
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	close(stop)
	committer.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if got := succeeded + p.Commit(false).Succeeded; got != int64(b.N) {
		b.Fatalf("succeeded %d of %d", got, b.N)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/msg")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/msg")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "B/msg")
}

// BenchmarkThrottleWait measures the process-wide limiter's Wait at a limit
// far above what is reached, alone and from every P at once (every worker
// calls it before every send).
func BenchmarkThrottleWait(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		t := fanout.NewThrottle(1e9, 0)
		b.ReportAllocs()
		for b.Loop() {
			if err := t.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		t := fanout.NewThrottle(1e9, 0)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := t.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkSend compares one FCM send through FCMSender, with the firebase
// SDK's Send (sdk) and with the body encoded once per message (direct, the
// default), with the same request made by a bare net/http client
// with a pre-encoded body, against a trivial in-process endpoint that
// answers success at once. All pay the same server and loopback cost, so
// the difference per op is the client-side overhead (message to JSON
// by reflection, request building, response decoding) and its allocations.
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{"name":"projects/bench/messages/1"}`)
	}))
	defer srv.Close()
	const conc = 64
	msg := &fanout.Message{Title: "pushfan bench", Body: "one message per token, measured", CollapseKey: "pushfan-1"}
	token := "bench-token-000001-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789"

	for _, client := range []string{fanout.ClientSDK, fanout.ClientDirect} {
		b.Run(client, func(b *testing.B) {
			s, err := fanout.NewFCMSender(context.Background(), fanout.FCMOptions{Endpoint: srv.URL + "/v1", ProjectID: "bench", Concurrency: conc, Client: client})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			b.SetParallelism(conc / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if err := s.Send(ctx, msg, token); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("raw", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConns: conc + 16, MaxIdleConnsPerHost: conc + 16, IdleConnTimeout: 90 * time.Second}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		body := []byte(`{"message":{"token":"` + token + `","notification":{"title":"pushfan bench","body":"one message per token, measured"},` +
			`"android":{"collapse_key":"pushfan-1"},"apns":{"headers":{"apns-collapse-id":"pushfan-1"}}}}`)
		url := srv.URL + "/v1/projects/bench/messages:send"
		b.ReportAllocs()
		b.SetParallelism(conc / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	})
}
