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
	keep := s.failures[:0]
	for _, f := range s.failures {
		if f.TokenID <= cursor {
			fs = append(fs, f)
		} else {
			keep = append(keep, f)
		}
	}
	s.failures = keep
	var ds []repository.Invalidation
	keepD := s.dead[:0]
	for _, d := range s.dead {
		if d.TokenID <= cursor {
			ds = append(ds, d)
		} else {
			keepD = append(keepD, d)
		}
	}
	s.dead = keepD
	return fs, ds
}

// putBack returns a batch whose checkpoint failed, for the next one.
func (s *sink) putBack(fs []repository.Failure, ds []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(fs, s.failures...)
	s.dead = append(ds, s.dead...)
}
