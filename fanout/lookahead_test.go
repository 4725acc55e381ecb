package fanout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// With a Cap, the next page is reserved while this one's targets are
// handed to the workers: the reservation does not hold the sends up.
func TestCapReservesTheNextPageWhileThisOneIsEnqueued(t *testing.T) {
	ts := makeTargets(300, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	e := testEngine(t, Config{PageSize: 100}, &fakeSender{})
	second := make(chan struct{})
	var calls, gated atomic.Int64
	var ahead atomic.Bool
	// The first page's first target waits at the gate until the second
	// page is reserved.
	gate := gateFunc(func(context.Context) error {
		if gated.Add(1) == 1 {
			select {
			case <-second:
				ahead.Store(true)
			case <-time.After(5 * time.Second):
			}
		}
		return nil
	})
	c, err := runJob(context.Background(), t, e, Job{Source: &sliceSource{ts}, Gate: gate,
		Cap: func(_ context.Context, page []Target) ([]bool, error) {
			if calls.Add(1) == 2 {
				close(second)
			}
			return make([]bool, len(page)), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !ahead.Load() {
		t.Fatal("the second page was not reserved while the first one was being enqueued")
	}
	if c.Succeeded != 300 || calls.Load() != 3 {
		t.Fatalf("committed %+v after %d Cap calls; want every target sent, one call per page", c, calls.Load())
	}
}

// A page reserved ahead that the run's stop keeps from being enqueued is
// counted canceled, with its users listed unsent (as a reservation cut
// short by the stop), so that the checkpoint gives their slots back; none
// of its targets is sent, and nothing after it is read.
func TestAPageReservedAheadOfAStopIsAbandoned(t *testing.T) {
	ts := makeTargets(300, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{}
	e := testEngine(t, Config{PageSize: 100}, s)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan struct{})
	var once sync.Once
	var calls, gated atomic.Int64
	// The stop comes while the first page is enqueued, once the second is
	// reserved.
	gate := gateFunc(func(context.Context) error {
		if gated.Add(1) == 10 {
			select {
			case <-second:
			case <-time.After(5 * time.Second):
				t.Error("the second page was never reserved")
			}
			cancel()
			return context.Canceled
		}
		return nil
	})
	c, _ := runJob(ctx, t, e, Job{Source: &sliceSource{ts}, Gate: gate,
		Cap: func(_ context.Context, page []Target) ([]bool, error) {
			out := make([]bool, len(page))
			if calls.Add(1) == 2 {
				for i := range out {
					out[i] = i%4 == 0 // capped answers of a page never enqueued count canceled too
				}
				once.Do(func() { close(second) })
			}
			return out, nil
		}})
	if calls.Load() != 2 {
		t.Fatalf("Cap called %d times; want 2 (the third page is never read)", calls.Load())
	}
	if c.Succeeded+c.Canceled != 200 || c.Capped != 0 || c.Canceled < 100 || c.Cursor != 200 {
		t.Fatalf("committed %+v; want the first two pages' 200 targets with an outcome, the second's 100 canceled", c)
	}
	for _, tg := range ts[100:] {
		if s.count(tg.Token) != 0 {
			t.Fatalf("target %d of the abandoned page was sent", tg.Cursor)
		}
	}
	unsent := sortedUsers(c.UnsentUsers)
	for u := uint64(51); u <= 100; u++ {
		if !slices.Contains(unsent, u) {
			t.Fatalf("user %d of the abandoned page is not listed unsent: %v", u, unsent)
		}
	}
}
