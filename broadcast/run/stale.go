package run

import (
	"cmp"
	"slices"
	"sync"

	"pushfan/lease"
)

// staleKept collects the stale tokens (PUSHFAN_STALE_AFTER) a chunk's
// pages pass over, so that each is kept as outcome stale: the engine's
// producer adds them as it reads, and the run's next checkpoint takes
// them into its outcomes (never counted: a stale token is not targeted).
// The page reads them anyway (AudiencePageStale flags rather than
// filters), so keeping them costs no read of the audience.
//
// They are taken when a checkpoint is prepared and fixed in it, so that a
// retried checkpoint lists the same ones. A checkpoint that is lost (a
// takeover) loses its stale ones with its sends: the successor reads them
// again and keeps them.
type staleKept struct {
	mu  sync.Mutex
	ids []uint64
}

func (s *staleKept) add(id uint64) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
}

func (s *staleKept) take() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ids
	s.ids = nil
	return out
}

// withStale adds the stale cursors to a checkpoint's outcomes, in cursor
// order.
func withStale(out []lease.TargetOutcome, stale []uint64) []lease.TargetOutcome {
	if len(stale) == 0 {
		return out
	}
	// A page read again (a retry) tells the same token twice.
	slices.Sort(stale)
	for _, id := range slices.Compact(stale) {
		out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeStale})
	}
	slices.SortStableFunc(out, func(a, b lease.TargetOutcome) int { return cmp.Compare(a.Cursor, b.Cursor) })
	return out
}
