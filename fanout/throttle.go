package fanout

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"pushfan/internal/clock"

	"golang.org/x/time/rate"
)

// Throttle is the one rate limit of the process, shared by every broadcast
// (FCM's quota is per project, not per broadcast). On a 429 it pauses every
// worker until the server's Retry-After has passed, then ramps the rate back
// up from a tenth over RampUp so the whole pool does not hit FCM at the same
// instant the quota window refills.
type Throttle struct {
	lim    *rate.Limiter
	full   rate.Limit
	burst  int
	rampUp time.Duration
	now    func() time.Time

	// pausedUntil (unix ns) and ramping are read lock-free on every Wait;
	// mu serialises the rare writers (Pause, ramp steps).
	pausedUntil atomic.Int64
	ramping     atomic.Bool
	mu          sync.Mutex
}

// NewThrottle allows perSecond messages per second with a burst of 100 ms
// worth.
//
// The burst is what a stall gives back: while every worker is busy (a GC
// pause, a slow page, CPU taken by a neighbour) unused permits pile up to
// the burst and are spent when workers return; past it they are lost for
// good. With 10 ms worth, a 1M-token run against the quota sustained 94.7%
// of it; see docs/PERFORMANCE.md. It cannot break FCM's per-minute quota:
// a full bucket plus a minute at the rate is 100.17% of the rate's minute
// (at the default 9,900/s, 594,990 of 600,000), and the worker count caps
// how many sends a burst can put in flight at once.
func NewThrottle(perSecond float64, rampUp time.Duration) *Throttle {
	burst := int(perSecond / 10)
	if burst < 1 {
		burst = 1
	}
	return &Throttle{
		lim:    rate.NewLimiter(rate.Limit(perSecond), burst),
		full:   rate.Limit(perSecond),
		burst:  burst,
		rampUp: rampUp,
		now:    time.Now,
	}
}

// Wait blocks until one message may be sent, or ctx ends.
func (t *Throttle) Wait(ctx context.Context) error {
	for {
		now := t.now()
		if until := t.pausedUntil.Load(); now.UnixNano() < until {
			if err := clock.Sleep(ctx, time.Duration(until-now.UnixNano())); err != nil {
				return err
			}
			continue
		}
		if t.ramping.Load() {
			t.mu.Lock()
			t.adjustRamp(now)
			t.mu.Unlock()
		}
		return t.lim.Wait(ctx)
	}
}

// adjustRamp raises the limit linearly from 10% to 100% over rampUp after a
// pause. Called with t.mu held.
func (t *Throttle) adjustRamp(now time.Time) {
	if !t.ramping.Load() {
		return
	}
	elapsed := now.Sub(time.Unix(0, t.pausedUntil.Load()))
	frac := 1.0
	if t.rampUp > 0 {
		frac = 0.1 + 0.9*float64(elapsed)/float64(t.rampUp)
	}
	if frac >= 1 {
		t.lim.SetLimitAt(now, t.full)
		t.lim.SetBurstAt(now, t.burst)
		t.ramping.Store(false)
		return
	}
	want := rate.Limit(float64(t.full) * frac)
	if cur := t.lim.Limit(); want > cur*1.05 || want < cur*0.95 {
		t.lim.SetLimitAt(now, want)
	}
}

// Pause stops every Wait until at least until (Retry-After), then ramps up.
// Pauses only extend, never shorten.
func (t *Throttle) Pause(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.UnixNano() <= t.pausedUntil.Load() {
		return
	}
	t.pausedUntil.Store(until.UnixNano())
	t.ramping.Store(true)
	// Drop the burst to one so the bucket filled during the pause cannot
	// release a herd at the boundary, and start the ramp at 10%.
	t.lim.SetBurstAt(until, 1)
	t.lim.SetLimitAt(until, t.full*0.1)
}
