package run

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"pushfan/fanout"
	"pushfan/internal/platform/clock"
	"pushfan/model"
	"pushfan/repository"
)

// pacer keeps one pace (a rate.Limiter) per paced broadcast running here,
// shared by its chunk runs on this instance (the engine waits on it before handing a
// target to the workers, so the workers never wait on a pace).
//
// Every paceEvery it recomputes each pace from the database: the
// broadcast's rate is its max_rate, or for deliver_over what is left over
// the time that is left (so the sends spread evenly to the end, catching
// up after a pause or a takeover), never above max_rate or the project's
// budget. This process takes the part of it that its running chunks are
// of the broadcast's running chunks on every instance; it counts its own
// runs itself, so two processes wrongly started under one instance name
// still split the pace instead of each taking all of it.
type pacer struct {
	reads  *repository.Store
	budget float64
	log    *slog.Logger

	mu sync.Mutex
	m  map[uint64]*pace
}

// pace is one broadcast's Pacer on this instance.
type pace struct {
	b    *model.Broadcast
	lim  *rate.Limiter
	runs int
	// idleSince is when its last run here ended (zero while one runs): it
	// is kept a little, for this instance's next chunk of the broadcast.
	idleSince time.Time
	// notBefore holds the first sends of a pace that joined chunks of the
	// broadcast running on other instances, until they have recomputed
	// theirs and made room (see join).
	notBefore atomic.Int64 // unix ns
}

// Wait waits for the pace's next permit.
func (p *pace) Wait(ctx context.Context) error {
	if d := time.Until(time.Unix(0, p.notBefore.Load())); d > 0 {
		if err := clock.Sleep(ctx, d); err != nil {
			return err
		}
	}
	return p.lim.Wait(ctx)
}

// Rate is the pace's rate now (for the rate budget's demand).
func (p *pace) Rate() float64 { return float64(p.lim.Limit()) }

// paceEvery is how often paces are recomputed.
const paceEvery = 500 * time.Millisecond

// keepIdle is how long a pace outlives its last run here: this instance's
// next chunk of the broadcast, claimed within it, keeps the pace (and does
// not wait as a newcomer would).
const keepIdle = 2 * time.Second

// unknownPace is the rate of a deliver_over broadcast whose plan has not
// counted any target yet: slow, rather than a guess that would finish
// early. A plan counts far faster than any pace sends, so this lasts a
// step or two.
const unknownPace = 10

func newPacer(reads *repository.Store, budget float64, log *slog.Logger) *pacer {
	return &pacer{reads: reads, budget: budget, log: log, m: map[uint64]*pace{}}
}

// running lists the paced broadcasts with a chunk running here: an
// instance runs one chunk of each at a time (its pace, not its chunks,
// sets its speed), so that one slow broadcast does not fill the paced
// slots while others wait.
func (p *pacer) running() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]uint64, 0, len(p.m))
	for id, pc := range p.m {
		if pc.runs > 0 {
			out = append(out, id)
		}
	}
	return out
}

// join returns the Pacer for a chunk run of b (nil when b has no pace)
// and the func that ends the run's use of it. A pace new on this instance
// while other instances run chunks of b waits a recompute period before
// its first send: until then their paces still count this instance out.
func (p *pacer) join(ctx context.Context, b *model.Broadcast) (fanout.Pacer, func()) {
	if !b.Paced() {
		return nil, func() {}
	}
	p.mu.Lock()
	pc, ok := p.m[b.ID]
	if !ok {
		first := p.cap(b)
		if b.DeliverOver > 0 {
			first = min(first, unknownPace)
		}
		pc = &pace{b: b, lim: rate.NewLimiter(rate.Limit(first), 1)}
		// Held until the first update says whether others run it.
		pc.notBefore.Store(time.Now().Add(paceEvery + 100*time.Millisecond).UnixNano())
		p.m[b.ID] = pc
	}
	pc.runs++
	pc.idleSince = time.Time{}
	p.mu.Unlock()
	if !ok {
		if st, ok := p.update(ctx, pc); ok && st.Running <= p.runsOf(pc) {
			pc.notBefore.Store(0) // nobody else runs it: nobody to make room
		}
	}
	return pc, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if pc.runs--; pc.runs == 0 {
			pc.idleSince = time.Now()
		}
	}
}

// runsOf is how many of pc's chunks this process runs now.
func (p *pacer) runsOf(pc *pace) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pc.runs
}

// cap is the most b may go at.
func (p *pacer) cap(b *model.Broadcast) float64 {
	if b.MaxRate > 0 {
		return min(b.MaxRate, p.budget)
	}
	return p.budget
}

// run recomputes the paces every paceEvery until ctx ends.
func (p *pacer) run(ctx context.Context) {
	t := time.NewTicker(paceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		paces := make([]*pace, 0, len(p.m))
		for id, pc := range p.m {
			switch {
			case pc.runs > 0:
				paces = append(paces, pc)
			case time.Since(pc.idleSince) > keepIdle:
				delete(p.m, id) // its chunks here are done, or went elsewhere
			}
		}
		p.mu.Unlock()
		for _, pc := range paces {
			p.update(ctx, pc)
		}
	}
}

// update sets pc's limiter to this instance's part of the broadcast's rate,
// and returns what it read. On a failed read it keeps the last rate.
func (p *pacer) update(ctx context.Context, pc *pace) (repository.PaceState, bool) {
	ctx, cancel := context.WithTimeout(ctx, paceEvery)
	defer cancel()
	st, err := p.reads.Pace(ctx, pc.b.ID)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			p.log.Warn("reading a paced broadcast's progress failed; keeping its pace", "broadcast_id", pc.b.ID, "err", err)
		}
		return st, false
	}
	r := paceRate(pc.b, st, p.cap(pc.b))
	if r <= 0 {
		r = min(p.cap(pc.b), unknownPace) // nothing counted yet: go slowly
	}
	mine := max(p.runsOf(pc), 1)
	all := max(st.Running, mine)
	r = r * float64(mine) / float64(all)
	now := time.Now()
	pc.lim.SetLimitAt(now, rate.Limit(r))
	// 20 ms worth: even to the eye, and no timer per send at high rates.
	pc.lim.SetBurstAt(now, max(1, int(r/50)))
	return st, true
}

// paceRate is b's rate for the whole cluster now, at most limit; 0 when it
// cannot be known yet (a deliver_over audience its plan has not counted).
// While the plan still runs, targeted is what it has counted so far: the
// pace rises as the count does, and keeps to the deadline.
func paceRate(b *model.Broadcast, st repository.PaceState, limit float64) float64 {
	if b.DeliverOver <= 0 {
		return limit
	}
	if st.Targeted <= 0 {
		return 0
	}
	left := b.DeliverOver - st.Elapsed
	remaining := st.Targeted - st.Attempted
	if left <= 0 || remaining <= 0 {
		return limit // overdue (or recounting): as fast as allowed
	}
	return math.Min(limit, math.Max(float64(remaining)/left.Seconds(), 0.1))
}

// ExpectedFinish estimates when a running broadcast will end, for the API:
// a deliver_over broadcast at its deadline (or later if its audience does
// not fit in it), any other from the rate it has kept so far, capped by its
// max_rate and the project's budget. nil when it is not running or its
// audience is not counted yet (while its plan runs, a deliver_over
// broadcast's deadline, any other nil: the rest of a count is no estimate).
func ExpectedFinish(b *model.Broadcast, budget float64, now time.Time) *time.Time {
	if b.Status != model.StatusRunning || b.StartedAt == nil {
		return nil
	}
	if !b.TargetedKnown() || b.Targeted <= 0 {
		if deadline := b.StartedAt.Add(b.DeliverOver); b.DeliverOver > 0 && deadline.After(now) {
			return &deadline
		}
		return nil
	}
	limit := budget
	if b.MaxRate > 0 {
		limit = min(b.MaxRate, budget)
	}
	attempted := b.Succeeded + b.Failed + b.Canceled + b.Capped
	remaining := max(b.Targeted-attempted, 0)
	atRate := func(r float64) time.Time {
		return now.Add(time.Duration(float64(remaining) / r * float64(time.Second)))
	}
	if b.DeliverOver > 0 {
		if deadline := b.StartedAt.Add(b.DeliverOver); deadline.After(now) {
			t := atRate(limit)
			if deadline.After(t) {
				t = deadline
			}
			return &t
		}
	}
	r := limit
	if elapsed := now.Sub(*b.StartedAt); elapsed >= 2*time.Second && attempted > 0 {
		r = min(limit, float64(attempted)/elapsed.Seconds())
	}
	t := atRate(r)
	return &t
}
