package fanout

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Past its grant the throttle gives no permit, urgent or not, until the
// grant is renewed, which wakes a waiter it held; and a permit reserved
// before the grant ran out but due after it is not given.
func TestThrottleGivesNoPermitPastItsGrant(t *testing.T) {
	th := NewThrottle(1e6, 0, 0)
	permit := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		return th.Wait(ctx) == nil
	}
	if !permit() {
		t.Fatal("no permit from a throttle without a grant")
	}
	th.GrantUntil(time.Now().Add(time.Hour))
	if !permit() {
		t.Fatal("no permit within the grant")
	}
	th.GrantUntil(time.Now())
	if permit() {
		t.Fatal("a permit past the grant")
	}
	got := make(chan error, 1)
	go func() { got <- th.WaitUrgent(context.Background()) }()
	select {
	case err := <-got:
		t.Fatalf("an urgent permit past the grant (err %v)", err)
	case <-time.After(30 * time.Millisecond):
	}
	th.GrantUntil(time.Time{})
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for the held urgent waiter to get its permit once the grant was lifted")
	}

	// At 10/s the next permit after the burst is 100 ms away; the grant
	// ends before it is due.
	slow := NewThrottle(10, 0, 0)
	if err := slow.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	slow.GrantUntil(time.Now().Add(20 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := slow.Wait(ctx); err == nil {
		t.Fatal("a permit reserved within the grant was given after it ran out")
	}
}

// A rise applies at once to the sends already waiting: twenty sends
// waiting on a share of 1/s (a member's trickle while it joins, a paced
// broadcast's demand) go at once when the share becomes 10,000/s, instead
// of one a second for twenty seconds.
func TestThrottleRaiseAppliesToTheSendsWaiting(t *testing.T) {
	th := NewThrottle(1, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := th.Wait(ctx); err != nil { // the burst
		t.Fatal(err)
	}
	const waiters = 20
	got := make(chan error, waiters)
	for range waiters {
		go func() { got <- th.Wait(ctx) }()
	}
	time.Sleep(50 * time.Millisecond) // let them queue at 1/s
	th.SetLimit(10000)
	start := time.Now()
	deadline := time.After(5 * time.Second)
	for i := range waiters {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("%d of %d waiters had a permit 5 s after the rate rose to 10,000/s: they kept waiting at 1/s", i, waiters)
		}
	}
	t.Logf("%d waiters at 1/s had their permits %v after the rise", waiters, time.Since(start).Round(time.Millisecond))
}

// A throttle raised from the trickle starts with the trickle's nearly empty
// bucket; Fill gives it what idle at its new rate would have: the full
// burst after a long idle, the rate's worth of a short one (the first
// second of a lone broadcast). A pause's ramp is never filled.
func TestThrottleFillGivesTheBurstAtOnce(t *testing.T) {
	const rate = 1000 // burst: 100 ms worth, 100 permits
	// burstOf counts the permits taken before the first wait; the bucket
	// refills at the limit while it counts (a loaded machine counts slowly),
	// so what it may hold is the burst plus that: accrued reports it.
	var began time.Time
	accrued := func(limit float64) int { return int(time.Since(began).Seconds()*limit) + 1 }
	burstOf := func(th *Throttle) int {
		began = time.Now()
		n := 0
		for n < 1000 {
			waited, _ := th.PermitWaits()
			if err := th.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if w, _ := th.PermitWaits(); w > waited {
				return n
			}
			n++
		}
		return n
	}
	th := NewThrottle(rate/100, 0, 0) // the trickle
	burstOf(th)                       // spend its bucket
	th.SetLimit(rate)
	if n := burstOf(th); n > 10+accrued(rate) {
		t.Fatalf("%d permits without waiting right after a raise from the trickle, want its few (and %d accrued meanwhile)", n, accrued(rate))
	}
	th.SetLimit(rate / 100)
	burstOf(th)
	th.SetLimit(rate)
	th.Fill(time.Second)
	if n := burstOf(th); n < 95 || n > 100+accrued(rate) {
		t.Fatalf("%d permits without waiting after Fill, want the burst of 100 (and %d accrued meanwhile)", n, accrued(rate))
	}
	// After a short idle, only what it gave: 30 ms at 1,000/s.
	th.SetLimit(rate / 100)
	burstOf(th)
	th.SetLimit(rate)
	th.Fill(30 * time.Millisecond)
	if n := burstOf(th); n < 28 || n > 40+accrued(rate) {
		t.Fatalf("%d permits without waiting after Fill(30ms), want the 30 the idle gave (and %d accrued meanwhile)", n, accrued(rate))
	}

	th.Pause(time.Now().Add(10 * time.Millisecond))
	th.Fill(time.Second)
	if n := burstOf(th); n > 1 {
		t.Fatalf("%d permits without waiting after a pause and Fill, want at most 1 (the ramp's burst)", n)
	}
}

// A token bucket gives at most its burst plus the integral of its rate in
// any span, however often the rate changes: a share that rises and falls
// with the other instances' demand (a transactional send on another
// replica lowers it for a moment) mints no permits. Workers wait at a
// share that toggles between 200/s and 2,000/s every 25 ms; the permits
// given must stay within the bound computed from the times of the
// changes. A limiter that gave back reservations made at the low rate as
// if they had been made at the high one (golang.org/x/time/rate's CancelAt
// after SetLimit, golang/go#69419) minted up to a burst at each rise: a
// quota overshoot in the chaos soak (finding 10).
func TestThrottleRateChangesMintNoPermits(t *testing.T) {
	const low, high = 200.0, 2000.0
	th := NewThrottle(high, 0, 0)
	effLow, _ := th.effective(low)
	effHigh, burst := th.effective(high)
	ctx, cancel := context.WithCancel(context.Background())
	var given atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for th.Wait(ctx) == nil {
				given.Add(1)
			}
		})
	}
	// bound accumulates ∫rate: a rise is counted from just before its
	// SetLimit, a fall from just after, so the bound errs high.
	bound, at, cur := float64(burst)+1, start, float64(effHigh)
	for i := range 60 {
		time.Sleep(25 * time.Millisecond)
		next, share := float64(effLow), low
		if i%2 == 1 {
			next, share = float64(effHigh), high
		}
		if next > cur {
			now := time.Now()
			bound += cur * now.Sub(at).Seconds()
			at = now
			th.SetLimit(share)
		} else {
			th.SetLimit(share)
			now := time.Now()
			bound += cur * now.Sub(at).Seconds()
			at = now
		}
		cur = next
	}
	time.Sleep(25 * time.Millisecond)
	n := given.Load() // read before the end is taken: errs high
	bound += cur * time.Since(at).Seconds()
	cancel()
	wg.Wait()
	if float64(n) > bound {
		t.Fatalf("%d permits in %v of a share toggling between %.0f/s and %.0f/s every 25 ms, above the bucket's bound of %.0f (its burst %d + the rate's integral)",
			n, time.Since(start).Round(time.Millisecond), low, high, bound, burst)
	}
	t.Logf("%d permits, bound %.0f", n, bound)
}

// A pause that begins while a worker is between reading the clock and
// adjusting the ramp (another instance's Hold) does not set the rate below
// the ramp's start: with every other worker queued for a permit, a rate of
// 0 would give none, and nobody would come back to raise it.
func TestThrottleRampIgnoresAPauseNotEnded(t *testing.T) {
	th := NewThrottle(1000, 10*time.Second, 0)
	before := time.Now()
	th.Hold(before.Add(30 * time.Second))
	th.mu.Lock()
	th.adjustRamp(before) // read before the Hold
	th.mu.Unlock()
	if r, want := th.bucket.limit(), th.full*0.1; r != want {
		t.Fatalf("the rate is %.1f/s in a pause after a ramp step taken with a clock read before it, want the ramp's start %.1f/s", r, want)
	}
}
