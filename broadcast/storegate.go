package broadcast

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

// storeGate holds a chunk run's producer while its progress is not stored.
// Outcomes since the last confirmed checkpoint are what a kill -9 repeats;
// without the gate, a database that stalls for seconds lets a run keep
// sending for seconds, and a crash then repeats all of it (measured: 16,524
// duplicates of 60,000 after a 2 s stall, against a bound of 1,858). With
// it, a run sends at most FlushInterval + commitAllowance of targets past
// its last stored checkpoint (confirmOpen more when commits are slower
// than that), plus the sends already in flight: the
// producer stops handing out targets, and a worker that took one checks
// the gate again once it has its rate permit.
//
// A commit slower than the allowance would close the gate for good (by the
// time it is confirmed, its outcomes are older than maxAge), so each
// confirmed checkpoint also opens it for confirmOpen: with slow commits a
// run sends in short bursts between them, and a crash repeats at most
// confirmOpen more.
type storeGate struct {
	maxAge      time.Duration
	mu          sync.Mutex
	stored      time.Time     // when the last confirmed checkpoint's outcomes were taken
	confirmedAt time.Time     // when it was confirmed
	opened      chan struct{} // closed (and replaced) at every confirmed checkpoint
}

func newStoreGate(flush time.Duration, now time.Time) *storeGate {
	return &storeGate{maxAge: flush + commitAllowance, stored: now, confirmedAt: now, opened: make(chan struct{})}
}

// open reports whether the gate is open (called with g.mu held).
func (g *storeGate) open() bool {
	return time.Since(g.stored) <= g.maxAge || time.Since(g.confirmedAt) <= confirmOpen
}

// Open reports whether a new send may go: the last stored checkpoint is
// recent, or was just confirmed.
func (g *storeGate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open()
}

// Wait returns at once while the last stored checkpoint is recent, else
// when a newer one is stored or ctx ends.
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

// confirmed records that the outcomes taken at `taken` are stored.
func (g *storeGate) confirmed(taken time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if taken.After(g.stored) {
		g.stored, g.confirmedAt = taken, time.Now()
		close(g.opened)
		g.opened = make(chan struct{})
	}
}
