package broadcast

import (
	"context"
	"sync"

	"pushfan/fanout"
	"pushfan/repository"
)

// sink collects failed targets from the engine's workers until a checkpoint
// stores those at or below its cursor (the rest wait: they may be re-sent
// by whoever resumes the chunk, and must not be recorded twice).
type sink struct {
	broadcastID uint64
	invalidate  bool // false for a dry run unless asked

	mu       sync.Mutex
	failures []pendingFailure
	dead     []pendingDead
}

// Pending records keep the target's audience cursor: checkpoints store
// those at or below their cursor.
type pendingFailure struct {
	cursor uint64
	f      repository.Failure
}

type pendingDead struct {
	cursor uint64
	d      repository.Invalidation
}

func newSink(id uint64, invalidate bool) *sink {
	return &sink{broadcastID: id, invalidate: invalidate}
}

// Failed implements fanout.Observer.
func (s *sink) Failed(_ context.Context, f fanout.Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, pendingFailure{f.Target.Cursor, repository.Failure{
		BroadcastID: s.broadcastID,
		TokenID:     f.Target.TokenID,
		UserID:      f.Target.UserID,
		Code:        f.Code,
		Message:     f.Message,
		Attempts:    f.Attempts,
	}})
	if f.Dead && s.invalidate {
		s.dead = append(s.dead, pendingDead{f.Target.Cursor, repository.Invalidation{TokenID: f.Target.TokenID, Token: f.Target.Token, Reason: f.Code}})
	}
}

// upTo removes and returns what concerns targets with id <= cursor.
func (s *sink) upTo(cursor uint64) ([]repository.Failure, []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pf []pendingFailure
	var pd []pendingDead
	pf, s.failures = split(s.failures, func(p pendingFailure) bool { return p.cursor <= cursor })
	pd, s.dead = split(s.dead, func(p pendingDead) bool { return p.cursor <= cursor })
	fs := make([]repository.Failure, len(pf))
	for i, p := range pf {
		fs[i] = p.f
	}
	ds := make([]repository.Invalidation, len(pd))
	for i, p := range pd {
		ds[i] = p.d
	}
	return fs, ds
}

// split returns the elements of xs that match and those that do not; the
// second reuses xs's array.
func split[T any](xs []T, match func(T) bool) (matched, rest []T) {
	rest = xs[:0]
	for _, x := range xs {
		if match(x) {
			matched = append(matched, x)
		} else {
			rest = append(rest, x)
		}
	}
	return matched, rest
}
