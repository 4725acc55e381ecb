package run

import (
	"context"
	"errors"
	"sync"
	"time"

	"pushfan/lease"
)

// dispatch claims chunks while this instance has a free slot for them,
// and runs each in its own goroutine. It returns when claiming stops; the
// runs it started are waited for by Stop through s.in.Group.
//
// Each class has ChunkParallel slots of its own (see lanes), so a
// transactional chunk is claimed at once however many bulk chunks run
// here, and paced chunks, which run slowly for a long time, never hold
// the bulk slots.
func (s *Runner) dispatch() {
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		c, lanes, err := s.claimNext()
		if err != nil || c == nil {
			if !s.in.Idle(idle, s.opt.PollInterval, s.wake, "a chunk", err) {
				return
			}
			continue
		}
		lane := lanes.take(c.Class)
		s.opt.Metrics.ChunkClaimed(c.Takeover)
		s.runs.add(c.Key)
		if !s.in.Group.Go(func() {
			defer func() {
				s.runs.remove(c.Key)
				lanes.release(lane)
				s.Poke() // a slot is free: look for more work at once
			}()
			s.runChunk(c)
		}) {
			// Stopping: a claim that committed as the stop began is handed
			// straight back, so another instance resumes it now rather than
			// when its lease expires (a graceful stop leaves no chunk
			// leased).
			s.runs.remove(c.Key)
			lanes.release(lane)
			s.releaseUnrun(c)
			return
		}
	}
}

// releaseUnrun hands back a chunk claimed but never run: its cursor and
// done ranges as claimed, no outcome. One attempt within the DB deadline:
// if it fails, the lease expires as it would have anyway.
func (s *Runner) releaseUnrun(c *lease.Claim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.in.Running), s.in.DBTimeout)
	defer cancel()
	if _, err := s.leases.Checkpoint(ctx, c, lease.Checkpoint{Cursor: c.Cursor, Done: c.Done, End: lease.Release}); err != nil && !errors.Is(err, lease.ErrLost) {
		s.in.Log.Warn("a chunk claimed as the instance stopped could not be handed back; its lease will expire", "broadcast_id", c.BroadcastID, "chunk", c.Seq, "err", err)
	}
}

// claimNext claims a chunk of the first app, in turn from the one after
// the last claim's, that has a free slot and a chunk to run: apps take
// turns at this instance's claims, each in its own slots. It returns the
// claim and its app's slots, nil when no app had work.
func (s *Runner) claimNext() (*lease.Claim, *lanes, error) {
	apps := s.apps.List()
	var errs []error
	for i := range apps {
		app := apps[(s.next+i)%len(apps)]
		l := s.lanes[app.Name]
		classes := l.free()
		if len(classes) == 0 {
			continue
		}
		c, err := s.claim(app.Name, classes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c != nil {
			s.next = (s.next + i + 1) % len(apps)
			return c, l, nil
		}
	}
	return nil, nil, errors.Join(errs...)
}

func (s *Runner) claim(app string, classes []lease.Class) (*lease.Claim, error) {
	ctx, cancel := context.WithTimeout(s.in.Claiming, s.in.DBTimeout)
	defer cancel()
	return s.leases.Claim(ctx, lease.ClaimOptions{
		Owner:   s.in.Owner,
		Lease:   s.in.Lease,
		Running: s.runs.keys(),
		Skip:    append(s.refused.current(s.in.Now()), s.pacer.running()...),
		Classes: classes,
		App:     app,
	})
}

// lanes are an instance's chunk slots: per lane, how many chunks run and
// may run. A transactional chunk takes a bulk slot when one is free (it
// goes first there too) and its own lane's otherwise.
type lanes struct {
	mu      sync.Mutex
	running [laneCount]int
	size    int
}

const (
	laneBulk = iota
	laneUrgent
	lanePaced
	laneCount
)

func newLanes(size int) *lanes { return &lanes{size: size} }

// free lists the classes a slot is free for. Only the dispatcher takes
// slots, so what it lists stays free until it takes one.
func (l *lanes) free() []lease.Class {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []lease.Class{}
	switch {
	case l.running[laneBulk] < l.size:
		out = append(out, lease.Transactional, lease.Bulk)
	case l.running[laneUrgent] < l.size:
		out = append(out, lease.Transactional)
	}
	if l.running[lanePaced] < l.size {
		out = append(out, lease.Paced)
	}
	return out
}

// take occupies a slot for a chunk of class (one free() listed).
func (l *lanes) take(class lease.Class) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	lane := laneBulk
	switch {
	case class == lease.Paced:
		lane = lanePaced
	case class == lease.Transactional && l.running[laneBulk] >= l.size:
		lane = laneUrgent
	}
	l.running[lane]++
	return lane
}

func (l *lanes) release(lane int) {
	l.mu.Lock()
	l.running[lane]--
	l.mu.Unlock()
}

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
