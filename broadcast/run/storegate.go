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
// checkpoint, whatever its share of the rate: a run at the trickle a
// member joins with still sends.
const minUnstored = 16

// storeGate holds a chunk run's producer while its progress is not stored.
// Outcomes since the last confirmed checkpoint are what a kill -9 repeats;
// without the gate, a database that stalls for seconds lets a run keep
// sending for seconds, and a crash then repeats all of it (measured: 16,524
// duplicates of 60,000 after a 2 s stall, against a bound of 1,858).
//
// Two limits hold a new send, and a worker that took a target checks them
// again once it has its rate permit:
//
//   - time: nothing new goes once the last stored checkpoint's outcomes are
//     older than FlushInterval + commitAllowance. A commit slower than that
//     would close the gate for good (by the time it is confirmed, its
//     outcomes are older than maxAge), so each confirmed checkpoint also
//     opens it for confirmOpen: with slow commits a run sends in short
//     bursts between them.
//   - count: the sends that passed the gate since the last stored
//     checkpoint's outcomes were taken stay under the run's part of
//     window × the rate limit (see Engine.RunShare). Time alone does not
//     bound them: while the gate is closed the rate limiter's bucket
//     refills, and when it opens every worker waiting at it spends the
//     bucket at once (100 ms of the limit), however slow the sends were
//     before. Under a loaded machine's slow commits that burst took a
//     kill -9 drill to 1,385 duplicates against its bound of 1,118.
//
// So a crash repeats at most the sends in flight plus window (FlushInterval
// + commitAllowance + confirmOpen) of sends at the rate limit, summed over
// the runs of the instance.
type storeGate struct {
	maxAge time.Duration
	// allowed is how many sends may be past the last stored checkpoint
	// now: the run's part of window × the rate limit. It is read at every
	// checkpoint (mark) into limit, never per send: it takes the engine's
	// and the throttle's locks.
	allowed func() int64

	mu          sync.Mutex
	stored      time.Time     // when the last confirmed checkpoint's outcomes were taken
	confirmedAt time.Time     // when it was confirmed
	limit       int64         // allowed, as the last mark read it (minUnstored at least)
	passed      int64         // sends that passed the gate since the run began
	storedAt    int64         // passed when the last confirmed checkpoint's outcomes were taken
	opened      chan struct{} // closed (and replaced) at every confirmed checkpoint
}

// gateMark is the moment a checkpoint's outcomes are taken: confirmed
// with it, the checkpoint covers the sends that had passed by then.
type gateMark struct {
	at     time.Time
	passed int64
}

// window is how long a run may send past its last stored checkpoint.
func window(flush time.Duration) time.Duration { return flush + commitAllowance + confirmOpen }

func newStoreGate(flush time.Duration, now time.Time, allowed func() int64) *storeGate {
	return &storeGate{maxAge: flush + commitAllowance, allowed: allowed, limit: max(allowed(), minUnstored),
		stored: now, confirmedAt: now, opened: make(chan struct{})}
}

// open reports whether the gate is open (called with g.mu held).
func (g *storeGate) open() bool {
	if g.passed-g.storedAt >= g.limit {
		return false
	}
	return time.Since(g.stored) <= g.maxAge || time.Since(g.confirmedAt) <= confirmOpen
}

// Open reports whether a new send may go: the last stored checkpoint is
// recent, or was just confirmed, and the sends past it are few. A true
// answer counts as a send (the worker that asks sends at once).
func (g *storeGate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open() {
		return false
	}
	g.passed++
	return true
}

// Wait returns at once while the gate is open, else when a newer
// checkpoint is stored or ctx ends.
func (g *storeGate) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		fresh, opened := g.open(), g.opened
		g.mu.Unlock()
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

// mark is taken with a checkpoint's outcomes; it also reads the run's
// allowance anew (the runs of the instance, and its share, change).
func (g *storeGate) mark() gateMark {
	limit := max(g.allowed(), minUnstored)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limit = limit
	return gateMark{at: time.Now(), passed: g.passed}
}

// confirmed records that the checkpoint taken at m is stored.
func (g *storeGate) confirmed(m gateMark) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !m.at.Before(g.stored) {
		g.stored, g.confirmedAt, g.storedAt = m.at, time.Now(), m.passed
		close(g.opened)
		g.opened = make(chan struct{})
	}
}
