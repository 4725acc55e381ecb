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

// storeGate holds a chunk run's producer while its progress is not stored.
// Outcomes since the last confirmed checkpoint are what a kill -9 repeats;
// without the gate, a database that stalls for seconds lets a run keep
// sending for seconds, and a crash then repeats all of it (measured: 16,524
// duplicates of 60,000 after a 2 s stall, against a bound of 1,858). With
// it, a run sends at most FlushInterval + commitAllowance of targets past
// its last stored checkpoint, plus the sends already in flight: the
// producer stops handing out targets, and a worker that took one checks
// the gate again once it has its rate permit.
type storeGate struct {
	maxAge time.Duration
	mu     sync.Mutex
	stored time.Time     // when the last confirmed checkpoint's outcomes were taken
	opened chan struct{} // closed (and replaced) at every confirmed checkpoint
}

func newStoreGate(flush time.Duration, now time.Time) *storeGate {
	return &storeGate{maxAge: flush + commitAllowance, stored: now, opened: make(chan struct{})}
}

// Open reports whether the last stored checkpoint is recent.
func (g *storeGate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Since(g.stored) <= g.maxAge
}

// Wait returns at once while the last stored checkpoint is recent, else
// when a newer one is stored or ctx ends.
func (g *storeGate) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		fresh, opened := time.Since(g.stored) <= g.maxAge, g.opened
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
		g.stored = taken
		close(g.opened)
		g.opened = make(chan struct{})
	}
}
