package fanout

import (
	"context"
	"errors"
	"fmt"
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

func (g *gateSender) Send(ctx context.Context, _ *Message, _ string) error {
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
		return ctx.Err()
	}
	return nil
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
// goroutines are gone when the last run returns.
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
	waitGoroutines(t, before)
}

// slowPeak makes each send of inner take delay, so runs overlap.
type slowPeak struct {
	inner Sender
	delay time.Duration
}

func (s *slowPeak) Send(ctx context.Context, m *Message, token string) error {
	time.Sleep(s.delay)
	return s.inner.Send(ctx, m, token)
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
	sc := newSendScope(30*time.Millisecond, 3)
	defer sc.close()

	ctx := sc.begin(0)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the send timeout never fired")
	}
	if err := sc.end(); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errSendTimeout) {
		t.Fatalf("cause after timeout = %v", err)
	}

	ctx2 := sc.begin(1)
	if ctx2.Err() != nil {
		t.Fatal("the next send got a canceled context")
	}
	if st, _ := ctx2.Value(attemptKey{}).(*attemptState); st == nil || st.used.Load() != 1 {
		t.Fatal("the send context does not carry the budget")
	}
	if err := sc.end(); err != nil {
		t.Fatalf("cause of an undisturbed send = %v", err)
	}
	ctx3 := sc.begin(0)
	if ctx3 != ctx2 {
		t.Fatal("a live context was not reused")
	}
	// Many quick sends: none may see a cancel armed for an earlier one.
	sc.end()
	for range 200 {
		c := sc.begin(0)
		time.Sleep(200 * time.Microsecond)
		if c.Err() != nil {
			t.Fatal("a quick send was canceled by an earlier send's timer")
		}
		if err := sc.end(); err != nil {
			t.Fatalf("cause = %v", err)
		}
	}

	// The budget transport's stop cancels with its own cause.
	c := sc.begin(2)
	sc.st.stop(errBudgetSpent)
	if c.Err() == nil {
		t.Fatal("stop did not cancel the send")
	}
	if err := sc.end(); !errors.Is(err, errBudgetSpent) {
		t.Fatalf("cause = %v", err)
	}
}
