package broadcast

import (
	"context"
	"time"
)

// promote runs the timed sweeps, each on its own (one failing never
// holds another back), on exactly one instance per row each (SKIP
// LOCKED): due scheduled broadcasts become planning; waiting chunks whose
// instant has come become pending; held broadcasts nobody released in time
// expire; and broadcasts an instance left behind with every chunk done but
// unfinished (it died between the two commits) are finished.
func (s *Service) promote() {
	t := time.NewTicker(min(s.opt.PollInterval, 500*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.claiming.Done():
			return
		case <-t.C:
		}
		s.sweep("promoting scheduled broadcasts", s.promoteScheduled)
		s.sweep("promoting waiting chunks", s.promoteWaiting)
		s.sweep("expiring held broadcasts", s.expireHolds)
		s.sweep("finishing stranded broadcasts", s.finishStranded)
	}
}

// sweep runs one of promote's sweeps with its own database deadline.
func (s *Service) sweep(what string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
	defer cancel()
	if err := fn(ctx); err != nil && s.claiming.Err() == nil {
		s.log.Warn(what+" failed; the next tick retries", "err", err)
	}
}

func (s *Service) promoteScheduled(ctx context.Context) error {
	ids, err := s.leases.PromoteDue(ctx)
	for _, id := range ids {
		s.reads.Forget(id)
		s.log.InfoContext(ctx, "scheduled broadcast is due: planning", "broadcast_id", id)
	}
	if len(ids) > 0 {
		s.planner.Wake()
	}
	return err
}

func (s *Service) promoteWaiting(ctx context.Context) error {
	for {
		n, err := s.leases.PromoteWaiting(ctx, 500)
		if n > 0 {
			s.runner.Poke()
		}
		if err != nil || n < 500 {
			return err
		}
	}
}

func (s *Service) finishStranded(ctx context.Context) error {
	ids, err := s.leases.Unfinished(ctx, 10)
	for _, id := range ids {
		s.runner.Finish(s.claiming, id)
	}
	return err
}
