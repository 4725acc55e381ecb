package broadcast

import (
	"context"
	"sync"
	"time"

	"pushfan/lease"
)

// refuseFor is how long an instance leaves a broadcast alone after
// handing one of its chunks back: long enough not to spin on it, short
// enough to notice soon when no instance can run it either.
const refuseFor = 5 * time.Second

// dispatch claims chunks while fewer than ChunkParallel run here, and runs
// each in its own goroutine. It returns when claiming stops; the runs it
// started are waited for by Stop through s.group.
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
		s.runs.add(c.Key)
		if !s.group.Go(func() {
			defer func() {
				s.runs.remove(c.Key)
				<-slots
				s.poke() // a slot is free: look for more work at once
			}()
			s.runChunk(c)
		}) {
			// Stopping: the claim's lease expires and any instance resumes it.
			s.runs.remove(c.Key)
			return
		}
	}
}

func (s *Service) claim() (*lease.Claim, error) {
	ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
	defer cancel()
	return s.leases.Claim(ctx, lease.ClaimOptions{
		Owner:   s.opt.Owner,
		Lease:   s.opt.Lease,
		Running: s.runs.keys(),
		Skip:    s.refused.current(s.now()),
	})
}

// refuse leaves broadcast id's chunks to other instances for a while.
func (s *Service) refuse(id uint64) { s.refused.add(id, s.now().Add(refuseFor)) }

// runSet is the chunks this instance runs now: an expired lease of one of
// them (a stall longer than the lease) is never claimed a second time here.
type runSet struct {
	mu sync.Mutex
	m  map[lease.Key]struct{}
}

func (r *runSet) add(k lease.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[lease.Key]struct{}{}
	}
	r.m[k] = struct{}{}
}

func (r *runSet) remove(k lease.Key) {
	r.mu.Lock()
	delete(r.m, k)
	r.mu.Unlock()
}

func (r *runSet) keys() []lease.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]lease.Key, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	return out
}

// refusals are broadcasts this instance cannot run, until when.
type refusals struct {
	mu sync.Mutex
	m  map[uint64]time.Time
}

func (r *refusals) add(id uint64, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint64]time.Time{}
	}
	r.m[id] = until
}

// current returns the broadcasts still refused at now, dropping the rest.
func (r *refusals) current(now time.Time) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for id, until := range r.m {
		if now.After(until) {
			delete(r.m, id)
			continue
		}
		out = append(out, id)
	}
	return out
}
