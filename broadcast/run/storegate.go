package run

import (
	"context"
	"sync"
	"time"
)

// commitAllowance is how long past a checkpoint interval a chunk's
// outcomes may go unstored before its run stops handing new targets to
// the workers: room for the checkpoint's own commit on a busy database.
const commitAllowance = 50 * time.Millisecond

// confirmOpen is how long each confirmed checkpoint opens the gate, however
// old its outcomes: what keeps a run sending (in short bursts) while every
// commit takes longer than the allowance.
const confirmOpen = 20 * time.Millisecond

// minUnstored is the fewest sends a run may have past its last stored
// checkpoint, whatever the other runs of its app have: a run at the
// trickle a member joins with, or a transactional run beside a saturated
// bulk, still sends.
const minUnstored = 16

// window is how much sending at the rate limit the runs of an app may have
// past their last stored checkpoints.
func window(flush time.Duration) time.Duration { return flush + commitAllowance + confirmOpen }

// unstored is what the chunk runs of one app on this instance may have
// sent past their last stored checkpoints, together: the app's rate limit
// × window. It is one of the two limits of the runs' store gates (see
// storeGate), and the one that holds on a loaded machine.
//
// It is the app's, shared by its runs (issue 38): each run used to have its
// own part, the app's limit split evenly over its runs, so that a run
// whose checkpoint was committing held its sends while the app's other
// runs left room. An app with several runs now uses the room one of them
// leaves, and another app's runs never count.
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

// storeGate holds a chunk run's producer while its progress is not stored.
// Outcomes since the last confirmed checkpoint are what a kill -9 repeats;
// without the gate, a database that stalls for seconds lets a run keep
// sending for seconds, and a crash then repeats all of it (measured: 16,524
// duplicates of 60,000 after a 2 s stall, against a bound of 1,858).
//
// Two limits hold a new send, and a worker that took a target checks them
// again once it has its rate permit (and gives the permit back when they
// hold it: fanout's Engine.permit):
//
//   - time: nothing new goes once the run's last stored checkpoint's
//     outcomes are older than FlushInterval + commitAllowance. A commit
//     slower than that would close the gate for good (by the time it is
//     confirmed, its outcomes are older than maxAge), so each confirmed
//     checkpoint also opens it for confirmOpen: with slow commits a run
//     sends in short bursts between them, and spends at each the permits
//     its app's throttle kept meanwhile (up to its burst, 100 ms of the
//     rate), which the workers waiting at the closed gate no longer drop.
//   - count: the sends of the app's runs past their last stored
//     checkpoints stay under window × the app's rate limit (see
//     unstored). Time alone does not bound them: while the gate is closed
//     the rate limiter's bucket refills, and when it opens every worker
//     waiting at it spends the bucket at once (100 ms of the limit),
//     however slow the sends were before. Under a loaded machine's slow
//     commits that burst took a kill -9 drill to 1,385 duplicates against
//     its bound of 1,118.
//
// So a crash repeats at most the sends in flight plus window (FlushInterval
// + commitAllowance + confirmOpen) of sends at each app's rate limit.
type storeGate struct {
	u      *unstored // the app's; its mu guards the fields below
	maxAge time.Duration

	stored      time.Time // when the last confirmed checkpoint's outcomes were taken
	confirmedAt time.Time // when it was confirmed
	passed      int64     // sends that passed the gate since the run began
	storedAt    int64     // passed when the last confirmed checkpoint's outcomes were taken
	closed      bool      // the run ended: its sends no longer count
}

// gateMark is the moment a checkpoint's outcomes are taken: confirmed
// with it, the checkpoint covers the sends that had passed by then.
type gateMark struct {
	at     time.Time
	passed int64
}

func newStoreGate(flush time.Duration, now time.Time, u *unstored) *storeGate {
	return &storeGate{u: u, maxAge: flush + commitAllowance, stored: now, confirmedAt: now}
}

// open reports whether the gate is open (called with g.u.mu held): the
// app's window has room, or the run has fewer than minUnstored sends past
// its own last checkpoint; and the run's last stored checkpoint is recent,
// or was just confirmed.
func (g *storeGate) open() bool {
	if g.closed || g.u.n >= g.u.limit && g.passed-g.storedAt >= minUnstored {
		return false
	}
	return time.Since(g.stored) <= g.maxAge || time.Since(g.confirmedAt) <= confirmOpen
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
// the app's runs is stored (it may have made room) or ctx ends.
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
	return gateMark{at: time.Now(), passed: g.passed}
}

// confirmed records that the checkpoint taken at m is stored: the sends
// that had passed by then no longer count.
func (g *storeGate) confirmed(m gateMark) {
	g.u.mu.Lock()
	defer g.u.mu.Unlock()
	if m.at.Before(g.stored) || g.closed {
		return
	}
	g.u.n -= m.passed - g.storedAt
	g.stored, g.confirmedAt, g.storedAt = m.at, time.Now(), m.passed
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
