package fanout

import (
	"context"
	"math"
	"sync"
	"time"
)

// permitBucket is the Throttle's token bucket: tokens accrue at rate up to
// burst, and a permit is given only for a token that is there. Waiters
// queue (urgent ones first, each queue first come first served) and a
// single timer hands out the tokens as they accrue, so a change of rate
// applies at once to everyone waiting: nothing is reserved ahead at the
// rate of the moment.
//
// It replaces golang.org/x/time/rate's Limiter there. The throttle's rate
// changes often (every change of this instance's share, every step of a
// ramp), and a Limiter's waiters hold reservations made at the old rate;
// cancelling them to ask again at the new one gives back more tokens than
// they took once the rate has risen (CancelAt reckons the tokens reserved
// after a reservation at the reservation's rate, golang/go#69419). Raises
// minted permits: 65 times the quota in TestThrottleRateChangesMintNoPermits,
// and a quota overshoot in the chaos soak (finding 10). Here the tokens
// never go below zero and a waiter that leaves takes none, so in any span
// the permits stay within the burst plus the integral of the rate.
type permitBucket struct {
	now func() time.Time

	mu     sync.Mutex
	rate   float64 // tokens a second
	burst  float64
	tokens float64   // 0 ≤ tokens ≤ burst
	last   time.Time // tokens is as of last
	// from is the end of a pause: no token accrues or is given before it.
	from         time.Time
	urgent, bulk permitQueue
	timer        *time.Timer // nil until first needed
	timerAt      time.Time   // when timer fires; zero: stopped
}

// permitWaiter is a Wait in the queue.
type permitWaiter struct {
	ch    chan struct{} // cap 1: the permit
	given bool          // a token was taken for it
	gone  bool          // it left without one
}

// permitQueue is a FIFO of waiters; those that left are skipped.
type permitQueue struct {
	ws   []*permitWaiter
	live int
}

func (q *permitQueue) push(w *permitWaiter) {
	q.ws = append(q.ws, w)
	q.live++
}

// pop returns the first waiter that has not left, or nil.
func (q *permitQueue) pop() *permitWaiter {
	for len(q.ws) > 0 {
		w := q.ws[0]
		q.ws[0] = nil
		q.ws = q.ws[1:]
		if !w.gone {
			q.live--
			return w
		}
	}
	return nil
}

// leave counts out a waiter that left. The queue drops those that left
// when they outnumber the others: at a rate of 0 nothing pops them, and
// sends whose contexts keep ending would pile up.
func (q *permitQueue) leave() {
	q.live--
	if len(q.ws) > 2*q.live+64 {
		kept := q.ws[:0]
		for _, w := range q.ws {
			if !w.gone {
				kept = append(kept, w)
			}
		}
		clear(q.ws[len(kept):])
		q.ws = kept
	}
}

func newPermitBucket(now func() time.Time) *permitBucket {
	// One token, like a new Limiter of burst 1: Fill gives a starting
	// instance the rest when it has earned them.
	return &permitBucket{now: now, burst: 1, tokens: 1, last: now()}
}

// take waits for a permit, urgent ones first. It reports whether it had to
// wait for one.
func (b *permitBucket) take(ctx context.Context, urgent bool) (waited bool, err error) {
	b.mu.Lock()
	now := b.now()
	b.advance(now)
	if b.urgent.live == 0 && (urgent || b.bulk.live == 0) && !now.Before(b.from) && b.tokens >= 1 {
		b.tokens--
		b.mu.Unlock()
		return false, nil
	}
	w := &permitWaiter{ch: make(chan struct{}, 1)}
	if urgent {
		b.urgent.push(w)
	} else {
		b.bulk.push(w)
	}
	// Tokens there already (a timer not yet fired) go to the first in line.
	b.dispatchLocked(now)
	b.mu.Unlock()
	select {
	case <-w.ch:
		return true, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.given {
		w.gone = true
		if urgent {
			b.urgent.leave()
		} else {
			b.bulk.leave()
		}
		// Brought up to now first: the timer set from stale tokens would
		// move later at every leave, and the next in line wait on.
		b.dispatchLocked(b.now())
		return true, ctx.Err()
	}
	// Given as ctx ended, and not used: the token goes back.
	b.giveBackLocked()
	return true, ctx.Err()
}

// giveBack returns a token that was taken and not used, as if it had not
// been taken (it was taken at or before now): the next in line gets it.
func (b *permitBucket) giveBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.giveBackLocked()
}

func (b *permitBucket) giveBackLocked() {
	now := b.now()
	b.advance(now)
	b.tokens = min(b.tokens+1, b.burst)
	b.dispatchLocked(now)
}

// advance brings tokens up to now.
func (b *permitBucket) advance(now time.Time) {
	start := b.last
	if b.from.After(start) {
		start = b.from
	}
	if now.After(start) {
		b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(start).Seconds())
	}
	if now.After(b.last) {
		b.last = now
	}
}

// update applies change to the bucket as of now: the tokens accrued so far
// at the old rate, none above the burst after it, and the waiters served
// from what is there.
func (b *permitBucket) update(change func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.advance(now)
	change()
	b.tokens = min(b.tokens, b.burst)
	b.dispatchLocked(now)
}

// set changes the rate and the burst.
func (b *permitBucket) set(r float64, burst int) {
	b.update(func() { b.rate, b.burst = max(r, 0), float64(max(burst, 1)) })
}

// pause gives no token until until, and from then on accrues at r up to
// burst, starting from at most burst.
func (b *permitBucket) pause(until time.Time, r float64, burst int) {
	b.update(func() {
		if until.After(b.from) {
			b.from = until
		}
		b.rate, b.burst = max(r, 0), float64(max(burst, 1))
	})
}

// setRate changes the rate alone (a ramp's step).
func (b *permitBucket) setRate(r float64) { b.update(func() { b.rate = max(r, 0) }) }

// fill sets the tokens to n (at most the burst); see Throttle.Fill.
func (b *permitBucket) fill(n float64) { b.update(func() { b.tokens = max(n, 0) }) }

// limit is the rate.
func (b *permitBucket) limit() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// dispatchLocked gives the tokens there are to the waiters, urgent first,
// and sets the timer for the next one.
func (b *permitBucket) dispatchLocked(now time.Time) {
	b.advance(now)
	if !now.Before(b.from) {
		for b.tokens >= 1 {
			w := b.urgent.pop()
			if w == nil {
				w = b.bulk.pop()
			}
			if w == nil {
				break
			}
			b.tokens--
			w.given = true
			w.ch <- struct{}{}
		}
	}
	b.scheduleLocked(now)
}

// scheduleLocked (tokens brought up to now) sets the timer for when the
// next waiter's token will be there, or stops it when nobody waits or no
// token will come.
func (b *permitBucket) scheduleLocked(now time.Time) {
	var at time.Time
	if b.urgent.live+b.bulk.live > 0 && b.rate > 0 {
		start := now
		if b.from.After(now) {
			start = b.from
		}
		// Rounded up: a timer a nanosecond early finds 0.9999 tokens.
		need := max(1-b.tokens, 0)
		at = start.Add(time.Duration(math.Ceil(need / b.rate * float64(time.Second))))
	}
	if at.Equal(b.timerAt) {
		return
	}
	b.timerAt = at
	switch {
	case at.IsZero():
		if b.timer != nil {
			b.timer.Stop()
		}
	case b.timer == nil:
		b.timer = time.AfterFunc(at.Sub(now), b.fire)
	default:
		b.timer.Reset(at.Sub(now))
	}
}

// fire is the timer's: the next token is there.
func (b *permitBucket) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timerAt = time.Time{}
	b.dispatchLocked(b.now())
}
