package broadcast

import (
	"context"
	"time"

	"pushfan/repository"
)

// dispatch claims chunks while fewer than ChunkParallel run here, and runs
// each in its own goroutine. It returns when claiming stops; the runs it
// started are waited for by Stop through s.wg.
func (s *Service) dispatch() {
	slots := make(chan struct{}, s.opt.ChunkParallel)
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		select {
		case slots <- struct{}{}:
		case <-s.claiming.Done():
			return
		}
		c, err := s.claim()
		if err != nil || c == nil {
			<-slots
			if err != nil && s.claiming.Err() == nil {
				s.log.Warn("claiming a chunk failed", "err", err)
			}
			idle.Reset(s.opt.PollInterval)
			select {
			case <-s.claiming.Done():
				return
			case <-s.wake:
			case <-idle.C:
			}
			continue
		}
		s.opt.Metrics.ChunkClaimed(c.Takeover)
		s.wg.Go(func() {
			defer func() {
				<-slots
				s.poke() // a slot is free: look for more work at once
			}()
			s.runChunk(c)
		})
	}
}

func (s *Service) claim() (*repository.Chunk, error) {
	ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
	defer cancel()
	return s.store.ClaimChunk(ctx, s.opt.Owner, s.opt.Lease)
}
