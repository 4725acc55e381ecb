package run

import (
	"context"
	"sync"
	"time"
)

// commitAllowance is how long past a checkpoint interval a chunk's
// outcomes may go unstored at the rate limit: room for the checkpoint's
// own commit on a busy database.
const commitAllowance = 50 * time.Millisecond

// confirmOpen is the slack for a commit slower than the allowance (part
// of window, the count the gates allow past the stored checkpoints).
const confirmOpen = 20 * time.Millisecond

// minUnstored is the fewest sends a run may have past its last stored
// checkpoint, whatever the other runs of its app have: a run at the
// trickle a member joins with, or a transactional run beside a saturated
// bulk, still sends.
const minUnstored = 16

// window is how much sending at the rate limit the runs of an app may have
// past their last stored checkpoints.
func window(flush time.Duration) time.Duration { return flush + commitAllowance + confirmOpen }

// unstored is what the chunk runs of one app on this instance may have sent
// past their last stored checkpoints, together: the app's rate limit ×
// window. Outcomes since the last confirmed checkpoint are what a kill -9
// repeats; without the gates, a database that stalls for seconds lets a
// run keep sending for seconds, and a crash then repeats all of it
// (measured: 16,524 duplicates of 60,000 after a 2 s stall, against a
// bound of 1,858). So a crash repeats at most the sends in flight plus
// window of sends at each app's rate limit.
//
// The bound is a count, held per app, not per run and not by time (issue
// 38). Each run used to have its own part (the limit split evenly over
// its app's runs) and also closed once its last stored checkpoint's
// outcomes were older than FlushInterval + commitAllowance. Both made a
// run's rate follow its commit latency, which is the database's, that is
// every other app's checkpoints as well: beside a saturated app A (four
// runs checkpointing every 50 ms), app B's one run found its outcomes too
// old at most checkpoints and sent in 20 ms bursts between them, at a
// third to a half of its quota. A count per app lets each app's runs send
// their app's rate whenever its sends past the stored checkpoints fit in
// the window, whatever their commits cost, and an app with several runs
// uses the room a run that is committing leaves. The count alone bounds
// what a crash repeats: while the database stalls, the sends stop once the
// app's window is spent (time bounded nothing more).
type unstored struct {
	// allowed is the app's rate limit × window: read at every checkpoint
	// (mark) into limit, never per send (it takes the throttle's lock).
	allowed func() int64

	mu     sync.Mutex
	limit  int64         // allowed, as the last mark read it
	n      int64         // sends of the app's runs past their last stored checkpoints
	opened chan struct{} // closed (and replaced) at every confirmed checkpoint of the app's runs
}

func newUnstored(allowed func() int64) *unstored {
	return &unstored{allowed: allowed, limit: max(allowed(), minUnstored), opened: make(chan struct{})}
}

// storeGate holds a chunk run's producer while its app's sends past their
// last stored checkpoints fill the app's window (see unstored). A worker
// that took a target checks it again once it has its rate permit.
type storeGate struct {
	u *unstored // the app's; its mu guards the fields below

	passed   int64 // sends that passed the gate since the run began
	storedAt int64 // passed when the last confirmed checkpoint's outcomes were taken
	closed   bool  // the run ended: its sends no longer count
}

// gateMark is the moment a checkpoint's outcomes are taken: confirmed
// with it, the checkpoint covers the sends that had passed by then.
type gateMark struct {
	passed int64
}

func newStoreGate(u *unstored) *storeGate { return &storeGate{u: u} }

// open reports whether the gate is open (called with g.u.mu held): the
// app's window has room, or the run has fewer than minUnstored sends past
// its own last checkpoint.
func (g *storeGate) open() bool {
	return !g.closed && (g.u.n < g.u.limit || g.passed-g.storedAt < minUnstored)
}

// Open reports whether a new send may go. A true answer counts as a send
// (the worker that asks sends at once).
func (g *storeGate) Open() bool {
	g.u.mu.Lock()
	defer g.u.mu.Unlock()
	if !g.open() {
		return false
	}
	g.passed++
	g.u.n++
	return true
}

// Wait returns at once while the gate is open, else when a checkpoint of
// the app's runs is stored or ctx ends.
func (g *storeGate) Wait(ctx context.Context) error {
	for {
		g.u.mu.Lock()
		fresh, opened := g.open(), g.u.opened
		g.u.mu.Unlock()
		if fresh {
			return nil
		}
		select {
		case <-opened:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// mark is taken with a checkpoint's outcomes; it also reads the app's
// allowance anew (its share of the project's budget changes).
func (g *storeGate) mark() gateMark {
	limit := max(g.u.allowed(), minUnstored)
	g.u.mu.Lock()
	defer g.u.mu.Unlock()
	g.u.limit = limit
	return gateMark{passed: g.passed}
}

// confirmed records that the checkpoint taken at m is stored: the sends
// that had passed by then no longer count.
func (g *storeGate) confirmed(m gateMark) {
	g.u.mu.Lock()
	defer g.u.mu.Unlock()
	if m.passed <= g.storedAt || g.closed {
		return
	}
	g.u.n -= m.passed - g.storedAt
	g.storedAt = m.passed
	close(g.u.opened)
	g.u.opened = make(chan struct{})
}

// close ends the run's part: it sends no more, and whatever it sent is
// stored, handed over or lost with its lease by now.
func (g *storeGate) close() {
	g.u.mu.Lock()
	defer g.u.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.u.n -= g.passed - g.storedAt
	close(g.u.opened)
	g.u.opened = make(chan struct{})
}
