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
	failures []repository.Failure
	dead     []repository.Invalidation
}

func newSink(id uint64, invalidate bool) *sink {
	return &sink{broadcastID: id, invalidate: invalidate}
}

// Failed implements fanout.Observer.
func (s *sink) Failed(_ context.Context, f fanout.Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, repository.Failure{
		BroadcastID: s.broadcastID,
		TokenID:     f.Target.TokenID,
		UserID:      f.Target.UserID,
		Code:        f.Code,
		Message:     f.Message,
		Attempts:    f.Attempts,
	})
	if f.Dead && s.invalidate {
		s.dead = append(s.dead, repository.Invalidation{TokenID: f.Target.TokenID, Reason: f.Code})
	}
}

// upTo removes and returns what concerns targets with id <= cursor.
func (s *sink) upTo(cursor uint64) ([]repository.Failure, []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fs []repository.Failure
	var ds []repository.Invalidation
	fs, s.failures = split(s.failures, func(f repository.Failure) bool { return f.TokenID <= cursor })
	ds, s.dead = split(s.dead, func(d repository.Invalidation) bool { return d.TokenID <= cursor })
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

// putBack returns a batch whose checkpoint failed, for the next one.
func (s *sink) putBack(fs []repository.Failure, ds []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(fs, s.failures...)
	s.dead = append(ds, s.dead...)
}
