package fanout

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"pushfan/internal/platform/clock"
)

// Throttle is the process's rate limit, shared by every broadcast (FCM's
// quota is per project, not per broadcast). Package quota sets it to this
// instance's share of the project's budget (SetLimit), for as long as the
// other instances count it in (GrantUntil), and spreads pauses between
// instances (OnPause, Hold).
//
// On a 429 it pauses every worker until the server's Retry-After has
// passed, then ramps the rate back up from a tenth over RampUp, so the
// whole pool does not hit FCM at the same instant the quota window refills.
//
// Urgent sends (a transactional broadcast's, WaitUrgent) go first: while
// one waits for a permit, bulk waiters hold back.
type Throttle struct {
	// bucket gives the permits; mu orders the writers that set its rate
	// and burst from the state below.
	bucket *permitBucket
	rampUp time.Duration
	window time.Duration
	now    func() time.Time

	// pausedUntil (unix ns) and ramping are read lock-free on every Wait;
	// mu serialises the rare writers (Pause, SetLimit, ramp steps).
	pausedUntil atomic.Int64
	ramping     atomic.Bool
	mu          sync.Mutex
	share       float64 // as SetLimit set it
	full        float64 // the share, corrected for the burst (see effective)
	burst       int
	onPause     func(until time.Time)

	// grantEnd is when the share runs out (GrantUntil), in nanoseconds
	// of the monotonic clock since epoch; math.MaxInt64: never. renewed
	// is closed (and replaced, under mu) by every GrantUntil, to wake the
	// waiters it holds.
	epoch    time.Time
	grantEnd atomic.Int64
	renewed  chan struct{}

	changed chan struct{} // signalled by SetLimit: the pool resizes at once

	// permits and waited count the permits given, and those that had to
	// wait for the rate: while most wait, the sends run at their limit with
	// CPU to spare (see PermitWaits).
	permits, waited atomic.Int64

	urgent   atomic.Int64 // urgent waiters
	urgentMu sync.Mutex
	gate     chan struct{} // closed when the last urgent waiter leaves
}

// NewThrottle allows perSecond messages per second, with a burst of 100 ms
// worth, such that no span of window (FCM's quota is counted per minute)
// admits more than perSecond × window.
//
// The burst is what a stall gives back: while every worker is busy (a GC
// pause, a slow page, CPU taken by a neighbour) unused permits pile up to
// the burst and are spent when workers return; past it they are lost for
// good. With 10 ms worth, a 1M-token run against the quota sustained 94.7%
// of it; see docs/PERFORMANCE.md. A full bucket plus a window at the rate
// could exceed the window's quota by the burst, and sends arriving late by
// up to arrivalLag squeeze a little more than a window's permits into one,
// so the rate is lowered by (burst + arrivalLag's worth)/window (0.25% for
// a minute, 1.5% for a 10 s window): the quota holds.
func NewThrottle(perSecond float64, rampUp, window time.Duration) *Throttle {
	if window <= 0 {
		window = time.Minute
	}
	t := &Throttle{rampUp: rampUp, window: window, now: time.Now, changed: make(chan struct{}, 1),
		renewed: make(chan struct{})}
	t.bucket = newPermitBucket(t.now)
	t.epoch = t.now()
	t.grantEnd.Store(math.MaxInt64)
	t.SetLimit(perSecond)
	return t
}

// arrivalLag is how much later than its permit a send may reach FCM (a
// worker descheduled, a write queued behind others on the connection):
// permits spread over window + arrivalLag can all arrive inside one window.
const arrivalLag = 50 * time.Millisecond

// effective is the rate and burst for perSecond (see NewThrottle).
func (t *Throttle) effective(perSecond float64) (float64, int) {
	burst := max(int(perSecond/10), 1)
	eff := perSecond - (float64(burst)+perSecond*arrivalLag.Seconds())/t.window.Seconds()
	if eff < perSecond/2 {
		eff = perSecond / 2 // a tiny rate: the burst of one dominates
	}
	return eff, burst
}

// SetLimit changes the rate (this instance's share of the budget). A ramp
// in progress goes on towards the new rate.
func (t *Throttle) SetLimit(perSecond float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if perSecond != t.share {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
	t.share = perSecond
	full, burst := t.effective(perSecond)
	if full == t.full && burst == t.burst {
		return
	}
	t.full, t.burst = full, burst
	if !t.ramping.Load() {
		t.bucket.set(full, burst)
	}
}

// Fill gives the bucket what a limiter held at the rate SetLimit set
// would hold after idle without a send: its burst at most, the rate's
// worth of idle below that. Package quota calls it when this instance
// starts sending with nobody else sending, after it was idle: until then it
// was held at the trickle, whose bucket is nearly empty, and a first second
// begun with an empty bucket falls short of the rate by the time the first
// sends took to start. A token bucket allows at most its burst plus the
// rate's worth in any span, whatever its idle times: that is what the
// rate's lowering keeps within the window's quota (see NewThrottle), and
// the idle is what pays for the refill. Nothing is filled during a
// pause's ramp.
func (t *Throttle) Fill(idle time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ramping.Load() || t.bucket.limit() != t.full || idle <= 0 {
		return
	}
	t.bucket.fill(math.Floor(t.full * idle.Seconds()))
}

// Limit is the rate SetLimit last set: the rate the throttle allows once
// any ramp after a pause is over.
func (t *Throttle) Limit() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.share
}

// GrantUntil bounds the share SetLimit set: from until on, Wait and
// WaitUrgent give no permit until a later GrantUntil; the zero time lifts
// the bound. Package quota renews it at every heartbeat to the instant the
// other instances may count this one out, so a process that stalls past it
// (a VM paused, SIGSTOP, a long GC) cannot spend, when it runs again, a
// share the others have taken over. By the monotonic clock.
func (t *Throttle) GrantUntil(until time.Time) {
	end := int64(math.MaxInt64)
	if !until.IsZero() {
		end = int64(until.Sub(t.epoch))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grantEnd.Store(end)
	close(t.renewed)
	t.renewed = make(chan struct{})
}

// lapsed reports whether the grant has run out at now.
func (t *Throttle) lapsed(now time.Time) bool {
	return int64(now.Sub(t.epoch)) >= t.grantEnd.Load()
}

// awaitGrant blocks while the grant has run out, until GrantUntil or ctx
// ends.
func (t *Throttle) awaitGrant(ctx context.Context) error {
	t.mu.Lock()
	renewed, lapsed := t.renewed, t.lapsed(t.now())
	t.mu.Unlock()
	if !lapsed {
		return nil
	}
	select {
	case <-renewed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OnPause installs fn, called (from a worker) when a 429 pauses this
// throttle: package quota publishes the pause to the other instances.
func (t *Throttle) OnPause(fn func(until time.Time)) {
	t.mu.Lock()
	t.onPause = fn
	t.mu.Unlock()
}

// Wait blocks until one bulk message may be sent, or ctx ends. It lets
// urgent waiters go first.
func (t *Throttle) Wait(ctx context.Context) error {
	for t.urgent.Load() > 0 {
		t.urgentMu.Lock()
		gate := t.gate
		t.urgentMu.Unlock()
		if gate == nil {
			break
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return t.wait(ctx, false)
}

// WaitUrgent is Wait for a transactional broadcast's send: bulk waiters
// hold back while it waits.
func (t *Throttle) WaitUrgent(ctx context.Context) error {
	t.urgentMu.Lock()
	if t.urgent.Add(1) == 1 {
		t.gate = make(chan struct{})
	}
	t.urgentMu.Unlock()
	defer func() {
		t.urgentMu.Lock()
		if t.urgent.Add(-1) == 0 {
			close(t.gate)
			t.gate = nil
		}
		t.urgentMu.Unlock()
	}()
	return t.wait(ctx, true)
}

func (t *Throttle) wait(ctx context.Context, urgent bool) error {
	for {
		now := t.now()
		if until := t.pausedUntil.Load(); now.UnixNano() < until {
			if err := clock.Sleep(ctx, time.Duration(until-now.UnixNano())); err != nil {
				return err
			}
			continue
		}
		if t.lapsed(now) {
			if err := t.awaitGrant(ctx); err != nil {
				return err
			}
			continue
		}
		if t.ramping.Load() {
			t.mu.Lock()
			t.adjustRamp(now)
			t.mu.Unlock()
		}
		waited, err := t.bucket.take(ctx, urgent)
		if err != nil {
			return err
		}
		t.permits.Add(1)
		if waited {
			t.waited.Add(1)
		}
		if !t.lapsed(t.now()) {
			return nil
		}
		// The permit came due after the grant ran out (queued before a
		// stall): it is not spent.
	}
}

// giveBack returns a permit Wait or WaitUrgent gave and that was not
// used: as if it had not been taken (the bucket holds at most its burst,
// so nothing is minted).
// It is not counted among the permits given (PermitWaits).
func (t *Throttle) giveBack() {
	t.permits.Add(-1)
	t.bucket.giveBack()
}

// PermitWaits returns how many permits the throttle has given, and how
// many of them had to wait for the rate. Between two reads, a high share
// of waits means the sends are held by their rate limit, not by the CPU:
// there is room for other work (a broadcast's plan) beside them.
func (t *Throttle) PermitWaits() (waited, permits int64) { return t.waited.Load(), t.permits.Load() }

// adjustRamp raises the limit linearly from 10% to 100% over rampUp after a
// pause. Called with t.mu held.
func (t *Throttle) adjustRamp(now time.Time) {
	if !t.ramping.Load() {
		return
	}
	// A pause that began after the caller read now (another instance's
	// Hold) has not ended at now: the ramp starts at its end, and a
	// negative elapsed would set the rate below the ramp's 10 %, to 0 at
	// worst, with every worker queued and none to come back and raise it.
	elapsed := now.Sub(time.Unix(0, t.pausedUntil.Load()))
	if elapsed < 0 {
		return
	}
	frac := 1.0
	if t.rampUp > 0 {
		frac = 0.1 + 0.9*float64(elapsed)/float64(t.rampUp)
	}
	if frac >= 1 {
		t.bucket.set(t.full, t.burst)
		t.ramping.Store(false)
		return
	}
	want := t.full * frac
	if cur := t.bucket.limit(); want > cur*1.05 || want < cur*0.95 {
		t.bucket.setRate(want)
	}
}

// Pause stops every Wait until at least until (a 429's Retry-After), then
// ramps up, and tells the OnPause hook so the other instances pause too.
// Pauses only extend, never shorten.
func (t *Throttle) Pause(until time.Time) {
	if t.hold(until) {
		t.mu.Lock()
		fn := t.onPause
		t.mu.Unlock()
		if fn != nil {
			fn(until)
		}
	}
}

// Hold is Pause for a pause another instance published: the hook is not
// told again.
func (t *Throttle) Hold(until time.Time) { t.hold(until) }

func (t *Throttle) hold(until time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.UnixNano() <= t.pausedUntil.Load() {
		return false
	}
	t.pausedUntil.Store(until.UnixNano())
	t.ramping.Store(true)
	// Drop the burst to one so the bucket filled during the pause cannot
	// release a herd at the boundary, and start the ramp at 10%.
	t.bucket.pause(until, t.full*0.1, 1)
	return true
}
