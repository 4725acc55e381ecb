package fanout_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pushfan/engagement"
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
		dst = append(dst, fanout.Target{Cursor: id, TokenID: id, UserID: id, Token: s.tokens[id%uint64(len(s.tokens))], Platform: benchPlatforms[id%3]})
	}
	return dst, nil
}

// noopSender accepts every send at once: what is left is the engine.
type noopSender struct{}

func (noopSender) Prepare(*fanout.Message) (fanout.Prepared, error) { return noopSender{}, nil }

func (noopSender) Send(context.Context, string, fanout.Budget) fanout.Outcome {
	return fanout.Outcome{}
}

// SendTagged makes noopSender a tagged Sender: the tag is made (the Job's
// Tag, on the send's worker) and dropped.
func (noopSender) SendTagged(context.Context, string, string, fanout.Budget) fanout.Outcome {
	return fanout.Outcome{}
}

// BenchmarkEngine runs one Job of b.N targets through the engine with a
// no-op Sender and reports the engine's own cost per message (ns/msg,
// allocs/msg, B/msg) at several worker counts. A committer goroutine calls
// Progress.Commit every 10 ms, as a chunk's checkpoint loop does, so the
// per-target page bookkeeping is released as in production. "prometheus"
// installs the service's real metrics hooks (a histogram observation and
// two counters per send); "tracked" signs each send's event token as the
// chunk runs do (package engagement), which tracking adds to every send.
func BenchmarkEngine(b *testing.B) {
	for _, tc := range []struct {
		workers         int
		metrics, tagged bool
	}{{1, false, false}, {64, false, false}, {512, false, false}, {512, true, false}, {512, true, true}} {
		name := fmt.Sprintf("workers=%d", tc.workers)
		if tc.metrics {
			name += "/prometheus"
		}
		if tc.tagged {
			name += "/tracked"
		}
		b.Run(name, func(b *testing.B) {
			benchEngine(b, tc.workers, tc.metrics, tc.tagged)
		})
	}
}

func benchEngine(b *testing.B, workers int, withMetrics, tagged bool) {
	eng, err := fanout.New(fanout.Config{
		Concurrency:    workers,
		PageSize:       1000,
		SendTimeout:    10 * time.Second,
		MaxAttempts:    5,
		RetryBaseDelay: 500 * time.Millisecond,
		RetryMaxDelay:  2 * time.Minute,
	}, noopSender{}, fanout.NewThrottle(1e9, 0, 0), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	eng.Start(context.Background())
	defer eng.Stop(context.Background()) //nolint:errcheck // a benchmark's engine; nothing is left running
	if withMetrics {
		eng.SetMetrics(metrics.New(prometheus.NewRegistry(), nil).ForApp("default"))
	}
	msg := &fanout.Message{Title: "bench", Body: "engine overhead", Delivery: fanout.Delivery{DisplayTag: "pushfan-1"}}
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
	job := fanout.Job{BroadcastID: 1, Message: msg, Source: src, Progress: p}
	if tagged {
		keys, err := engagement.NewKeys([]engagement.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}})
		if err != nil {
			b.Fatal(err)
		}
		tags := engagement.NewTagger(keys, 7*24*time.Hour, "")
		msg.Tagged = true
		job.Tag = func(t fanout.Target, variant int) string {
			return tags.Tag(1, t.Cursor, t.UserID, 0, variant+1, t.Platform)
		}
	}
	err = eng.Run(context.Background(), job)
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
		t := fanout.NewThrottle(1e9, 0, 0)
		b.ReportAllocs()
		for b.Loop() {
			if err := t.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		t := fanout.NewThrottle(1e9, 0, 0)
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
	// held: 512 workers (the default pool) waiting on a limit they
	// saturate, as a broadcast against its quota does; cpu-ns/permit is the
	// process's CPU a permit costs there.
	b.Run("held", func(b *testing.B) {
		const perSecond = 50000
		t := fanout.NewThrottle(perSecond, 0, 0)
		var left atomic.Int64
		left.Store(int64(b.N))
		cpu0 := processCPU(b)
		b.ResetTimer()
		var wg sync.WaitGroup
		for range 512 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := t.Wait(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/permit")
	})
}

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPlatforms are the targets' platforms, counted per platform by
// every Commit as a run's are.
var benchPlatforms = [3]string{"android", "ios", "web"}
