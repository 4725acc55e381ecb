package broadcast

import (
	"context"
	"sync"

	"pushfan/fanout"
	"pushfan/repository"
)

// sink collects failed tokens from the engine's workers and hands them to
// the flusher in batches: failures are recorded for the failures endpoint,
// dead tokens are invalidated so later broadcasts skip them.
type sink struct {
	broadcastID uint64
	invalidate  bool // false for a dry run unless asked
	batch       int
	full        chan struct{} // signalled when a batch is ready

	mu       sync.Mutex
	failures []repository.Failure
	dead     []repository.Invalidation
}

func newSink(id uint64, invalidate bool, batch int) *sink {
	return &sink{broadcastID: id, invalidate: invalidate, batch: batch, full: make(chan struct{}, 1)}
}

// Failed implements fanout.Observer.
func (s *sink) Failed(_ context.Context, f fanout.Failure) {
	s.mu.Lock()
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
	ready := len(s.failures) >= s.batch
	s.mu.Unlock()
	if ready {
		select {
		case s.full <- struct{}{}:
		default:
		}
	}
}

// take removes and returns what is pending.
func (s *sink) take() ([]repository.Failure, []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, d := s.failures, s.dead
	s.failures, s.dead = nil, nil
	return f, d
}

// putBack returns a batch that could not be written, so it is retried on
// the next flush instead of being lost.
func (s *sink) putBack(f []repository.Failure, d []repository.Invalidation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(f, s.failures...)
	s.dead = append(d, s.dead...)
}
