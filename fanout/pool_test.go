package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateSender holds every send until `want` sends are in flight at once (or
// a second passes), and records the highest number seen in flight.
type gateSender struct {
	want     int64
	inflight atomic.Int64
	peak     atomic.Int64
	total    atomic.Int64
	reached  chan struct{}
	once     sync.Once
}

func (g *gateSender) Prepare(m *Message) (Prepared, error) { return senderFunc(g.send).Prepare(m) }

func (g *gateSender) send(ctx context.Context, _ *Message, _ string) Outcome {
	n := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	g.total.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if n >= g.want {
		g.once.Do(func() { close(g.reached) })
	}
	select {
	case <-g.reached:
	case <-time.After(time.Second):
	case <-ctx.Done():
		return Outcome{Class: Transient, Code: "CANCELED"}
	}
	return Outcome{}
}

// One broadcast alone can use every worker of the engine: the pool is not
// split between runs in advance.
func TestOneRunUsesTheWholePool(t *testing.T) {
	g := &gateSender{want: 16, reached: make(chan struct{})}
	e := testEngine(t, Config{Concurrency: 16, PageSize: 50}, g)
	p := &Progress{}
	ts := makeTargets(200, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.reached:
	default:
		t.Fatalf("one run never had 16 sends in flight (peak %d)", g.peak.Load())
	}
	if c := p.Commit(false); c.Succeeded != 200 || g.total.Load() != 200 {
		t.Fatalf("succeeded %d, sends %d, want 200", c.Succeeded, g.total.Load())
	}
}

// Concurrent runs share the pool: together they never exceed Concurrency
// sends in flight, each gets all its targets sent once, and the pool's
// goroutines are gone once the engine is stopped.
func TestConcurrentRunsShareThePool(t *testing.T) {
	before := runtime.NumGoroutine()
	g := &gateSender{want: 1, reached: make(chan struct{})} // the gate opens at the first send
	s := &slowPeak{inner: g, delay: 2 * time.Millisecond}
	e := testEngine(t, Config{Concurrency: 12, PageSize: 40}, s)
	var wg sync.WaitGroup
	progress := make([]*Progress, 5)
	for i := range progress {
		progress[i] = &Progress{}
		ts := makeTargets(300, func(j int) string { return fmt.Sprintf("ok-%d-%d", i, j) })
		wg.Go(func() {
			if err := e.Run(context.Background(), Job{BroadcastID: uint64(i + 1), Message: &Message{}, Source: &sliceSource{ts}, Progress: progress[i]}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if peak := g.peak.Load(); peak > 12 {
		t.Fatalf("peak in flight %d > concurrency 12", peak)
	}
	for i, p := range progress {
		if c := p.Commit(false); c.Succeeded != 300 {
			t.Fatalf("run %d: succeeded %d, want 300", i, c.Succeeded)
		}
	}
	if g.total.Load() != 1500 {
		t.Fatalf("sends %d, want 1500", g.total.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before)
}

// slowPeak makes each send of inner take delay, so runs overlap.
type slowPeak struct {
	inner Sender
	delay time.Duration
}

func (s *slowPeak) Prepare(m *Message) (Prepared, error) {
	p, err := s.inner.Prepare(m)
	if err != nil {
		return nil, err
	}
	return senderFunc(func(ctx context.Context, _ *Message, token string) Outcome {
		time.Sleep(s.delay)
		return p.Send(ctx, token, Budget{})
	}).Prepare(m)
}

func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines remain, %d before the runs", runtime.NumGoroutine(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The scope's context is reused between sends, survives a timeout (the
// next send gets a live context), and a late timer never cancels the send
// that follows the one it was armed for.
func TestSendScopeTimeoutAndReuse(t *testing.T) {
	sc := newSendScope(30 * time.Millisecond)
	defer sc.close()

	ctx := sc.begin()
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the send timeout never fired")
	}
	if err := sc.end(); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errSendTimeout) {
		t.Fatalf("cause after timeout = %v", err)
	}

	ctx2 := sc.begin()
	if ctx2.Err() != nil {
		t.Fatal("the next send got a canceled context")
	}
	if err := sc.end(); err != nil {
		t.Fatalf("cause of an undisturbed send = %v", err)
	}
	ctx3 := sc.begin()
	if ctx3 != ctx2 {
		t.Fatal("a live context was not reused")
	}
	// Many quick sends: none may see a cancel armed for an earlier one.
	sc.end()
	for range 200 {
		c := sc.begin()
		time.Sleep(200 * time.Microsecond)
		if c.Err() != nil {
			t.Fatal("a quick send was canceled by an earlier send's timer")
		}
		if err := sc.end(); err != nil {
			t.Fatalf("cause = %v", err)
		}
	}
}

// Run refuses an engine that is not started or was stopped, and Stop waits
// for the Runs in progress.
func TestEngineLifecycle(t *testing.T) {
	e, err := New(Config{Concurrency: 2, PageSize: 10, SendTimeout: time.Second, MaxAttempts: 1}, &fakeSender{delay: 5 * time.Millisecond},
		NewThrottle(1e6, 0, 0), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts := makeTargets(50, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: &Progress{}}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Run before Start: %v", err)
	}
	e.Start(context.Background())
	e.Start(context.Background()) // twice: nothing more
	p := &Progress{}
	done := make(chan error, 1)
	go func() {
		done <- e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p})
	}()
	waitFor(t, "the run to start sending", func() bool { return p.Frontier.Load() > 0 })
	if err := e.Stop(context.Background()); err != nil { // waits for the Run in progress
		t.Fatal(err)
	}
	// What Stop waits for is the Run's work: every target ended (and the
	// Run's own goroutines gone) before Stop returns. The Run's return
	// itself, and this test's goroutine passing its result on, come after
	// the Run has told Stop it is done, so they may still be on their way:
	// a select with a default here raced them.
	if c := p.Commit(false); c.Succeeded != 50 {
		t.Fatalf("Stop returned with the run in progress at %d of 50 sent", c.Succeeded)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run in progress: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timed out after 10s waiting for the Run that Stop waited for to return")
	}
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: &Progress{}}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Run after Stop: %v", err)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
