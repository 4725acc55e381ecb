package fanout

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestWantFollowsRateAndLatency(t *testing.T) {
	for _, tc := range []struct {
		rate    float64
		latency time.Duration
		ceiling int
		want    int
	}{
		{9900, 10 * time.Millisecond, 4096, 124 + minWorkers},   // 9900 × 0.01 × 1.25 = 123.75
		{9900, 300 * time.Millisecond, 4096, 3713 + minWorkers}, // 3712.5
		{9900, time.Second, 4096, 4096},                         // the ceiling
		{0, 50 * time.Millisecond, 4096, minWorkers},
		{100, 10 * time.Millisecond, 12, 12}, // a ceiling under the floor wins
	} {
		if got := want(tc.rate, tc.latency, tc.ceiling); got != tc.want {
			t.Errorf("want(%v, %v, %d) = %d, want %d", tc.rate, tc.latency, tc.ceiling, got, tc.want)
		}
	}
}

// latencySender answers every send after the latency it is set to.
type latencySender struct {
	latency atomic.Int64
	sent    atomic.Int64
}

func (l *latencySender) Prepare(m *Message) (Prepared, error) { return senderFunc(l.send).Prepare(m) }

func (l *latencySender) send(ctx context.Context, _ *Message, _ string) Outcome {
	select {
	case <-time.After(time.Duration(l.latency.Load())):
	case <-ctx.Done():
		return Outcome{Class: Transient, Code: "CANCELED"}
	}
	l.sent.Add(1)
	return Outcome{}
}

// The pool grows to carry the rate when sends get slow, and gives the
// workers back when they get fast again: never the ceiling's thousands
// when a few dozen do.
func TestPoolFollowsLatency(t *testing.T) {
	s := &latencySender{}
	s.latency.Store(int64(100 * time.Millisecond))
	e := testEngineWith(t, Config{Concurrency: 4096, PageSize: 200, MaxAttempts: 2, RetryMaxDelay: time.Second}, s, NewThrottle(2000, 0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		ts := makeTargets(200000, func(i int) string { return fmt.Sprintf("ok-%d", i) })
		done <- e.Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: &Progress{}})
	}()
	// 2,000/s at 100 ms is 200 in flight: want() asks 266.
	slow := want(2000, 100*time.Millisecond, 4096)
	waitFor(t, fmt.Sprintf("the pool to grow towards %d workers at 100 ms", slow), func() bool {
		n, _ := e.Workers()
		return n >= slow*9/10
	})
	if _, peak := e.Workers(); peak > slow*11/10 {
		t.Fatalf("the pool peaked at %d workers, want about %d", peak, slow)
	}
	s.latency.Store(int64(5 * time.Millisecond))
	fast := want(2000, 5*time.Millisecond, 4096)
	waitFor(t, fmt.Sprintf("the pool to shrink towards %d workers at 5 ms", fast), func() bool {
		n, _ := e.Workers()
		return n <= fast+8
	})
	cancel()
	<-done
}

// A transactional run's targets take the urgent queue and the first
// permits: submitted while a bulk run saturates the throttle, it is done
// after at most about one pool's worth of bulk sends (those already
// holding a worker), not behind the bulk run's queue.
func TestUrgentRunGoesAheadOfBulk(t *testing.T) {
	var mu sync.Mutex
	var order []string
	s := senderFunc(func(_ context.Context, _ *Message, token string) Outcome {
		mu.Lock()
		order = append(order, token)
		mu.Unlock()
		return Outcome{}
	})
	const workers = 32
	e := testEngineWith(t, Config{Concurrency: workers, PageSize: 200, MaxAttempts: 2, RetryMaxDelay: time.Second}, s, NewThrottle(400, 0, 0))
	sent := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(order)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bulkDone := make(chan error, 1)
	go func() {
		ts := makeTargets(5000, func(i int) string { return fmt.Sprintf("bulk-%d", i) })
		bulkDone <- e.Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: &Progress{}})
	}()
	waitFor(t, "the bulk run to be sending", func() bool { return sent() >= 100 })
	if d := e.Demand(); !math.IsInf(d, 1) {
		t.Fatalf("Demand during an unpaced run = %v, want +Inf", d)
	}
	before := sent()
	if _, err := runJob(context.Background(), t, e, Job{Urgent: true,
		Source: &sliceSource{makeTargets(3, func(i int) string { return fmt.Sprintf("urgent-%d", i) })}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	var bulkBetween, urgent int
	for _, tok := range order[before:] {
		if tok[0] == 'u' {
			urgent++
		} else if urgent < 3 {
			bulkBetween++
		}
	}
	mu.Unlock()
	if urgent != 3 {
		t.Fatalf("%d urgent sends, want 3", urgent)
	}
	// The bulk queue alone holds PageSize (200) targets: behind it, the
	// urgent sends would wait for 200+ bulk sends.
	if bulkBetween > workers+8 {
		t.Fatalf("%d bulk sends went out while the urgent run waited, want at most about the pool (%d)", bulkBetween, workers)
	}
	t.Logf("%d bulk sends went out between the urgent submit and its last send (pool %d, bulk queue 200)", bulkBetween, workers)
	cancel()
	<-bulkDone
}

// Bulk waiters hold back while an urgent one waits for a permit.
func TestThrottleLetsUrgentWaitersFirst(t *testing.T) {
	th := NewThrottle(100, 0, 0)
	drain, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for range 10 { // the burst
		if err := th.Wait(drain); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if err := th.WaitUrgent(context.Background()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, "u")
			mu.Unlock()
		})
	}
	// Every urgent waiter is waiting, or already has its permit: on a
	// loaded machine the first may be served (at 100/s, a permit every
	// 10 ms) before the last has started, and those are first anyway.
	waitFor(t, "five urgent waiters waiting or served", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return th.urgent.Load()+int64(len(order)) == 5
	})
	for range 5 {
		wg.Go(func() {
			if err := th.Wait(context.Background()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, "b")
			mu.Unlock()
		})
	}
	wg.Wait()
	if got := fmt.Sprint(order); got != "[u u u u u b b b b b]" {
		t.Fatalf("permit order %s, want every urgent waiter first", got)
	}
}

// Demand is what package quota shares the budget by: the sum of the paced
// runs' rates, +Inf with an unpaced run, 0 when idle.
func TestDemandSumsPaces(t *testing.T) {
	gate := make(chan struct{})
	s := senderFunc(func(ctx context.Context, _ *Message, _ string) Outcome {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return Outcome{}
	})
	e := testEngine(t, Config{}, s)
	if d := e.Demand(); d != 0 {
		t.Fatalf("idle Demand = %v, want 0", d)
	}
	a, b := limiterPacer{rate.NewLimiter(300, 1)}, limiterPacer{rate.NewLimiter(200, 1)}
	var wg sync.WaitGroup
	for _, lim := range []Pacer{a, a, b} { // two runs share a's pace
		wg.Go(func() {
			if _, err := runJob(context.Background(), t, e, Job{Pace: lim, Source: &sliceSource{makeTargets(2, func(i int) string { return fmt.Sprint("t", i) })}}); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "three paced runs", func() bool { return e.Demand() == 500 })
	wg.Go(func() { // an urgent run adds UrgentDemand
		if _, err := runJob(context.Background(), t, e, Job{Urgent: true, Source: &sliceSource{makeTargets(1, func(int) string { return "u" })}}); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "an urgent run beside them", func() bool { return e.Demand() == 500+UrgentDemand })
	close(gate)
	wg.Wait()
	if d := e.Demand(); d != 0 {
		t.Fatalf("Demand after the runs = %v, want 0", d)
	}
}

// limiterPacer is a Pacer of a plain rate.Limiter.
type limiterPacer struct{ *rate.Limiter }

func (l limiterPacer) Rate() float64 { return float64(l.Limit()) }
