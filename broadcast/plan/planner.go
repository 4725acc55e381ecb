// Package plan turns a broadcast's audience into chunks. A submit stores
// the broadcast and answers; its audience is planned after that, in steps
// read in one ordered pass (planPass) on any instance, with every delivery
// mode the same pass: sent now, local time (send_at_local), quiet hours,
// named audiences, resends and user_ids lists. Each step stores the chunks
// it completed at once (lease.CommitStep), so sending starts with the
// first ones while the rest is planned, and a takeover resumes the plan
// from its stored cursor.
// Beside each plan, its users are counted (users.go).
package plan

import (
	"context"
	"fmt"
	"sync"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// Options tunes planning.
type Options struct {
	ChunkWidth uint64 // targets per chunk
	MaxChunks  int    // chunks per broadcast at most (wider chunks beyond)
	// PlanParallel is how many broadcasts this instance plans at once
	// (negative or 0: none, the other instances plan them).
	PlanParallel int
	// PlanRetry is the first wait before a failed plan is tried again (it
	// doubles per failure; 0: a second).
	PlanRetry    time.Duration
	PollInterval time.Duration // how often an idle planner looks for work
	// HandBackTimeout is how long a plan may go on being handed back by
	// every instance before its broadcast fails.
	HandBackTimeout time.Duration
	RateLimit       float64        // the project's sends a second (see rest)
	DefaultZone     *time.Location // users whose zone is unknown
	// Bind looks a named audience up and binds its stored parameters;
	// Named runs its SQL.
	Bind  func(model.Audience) (audience.Bound, error)
	Named *audience.Runner
	// Changed is told when a broadcast's row changed here (cached reads
	// of it are stale).
	Changed func(id uint64)
}

// Runs is what the planner asks of the sending side (package run).
type Runs interface {
	Poke()                                           // chunks were stored: claim them
	Finish(ctx context.Context, id uint64)           // end it if nothing is left open
	Fail(ctx context.Context, id uint64, msg string) // end it failed
	Refuse(id uint64)                                // leave it to other instances a while
	Refused() []uint64                               // what this instance leaves to others
}

// Load is how busy this instance's sends are (fanout.Engine).
type Load interface {
	Busy() bool
	PermitWaits() (waited, permits int64)
	// Demand is the rate the sends in progress ask for: +Inf when an
	// unpaced one takes every permit it gets, else the sum of their paces.
	Demand() float64
}

// appStore is the Store that reads b's app's tokens under b's category's
// consent; an error for an app this instance does not have.
func (s *Planner) appStore(b *model.Broadcast) (*repository.Store, error) {
	app, ok := s.apps.Get(b.App)
	if !ok {
		return nil, fmt.Errorf("app %q is not configured on this instance", b.App)
	}
	return app.Store.ForCategory(b.Category), nil
}

// Planner claims and runs this instance's plans.
type Planner struct {
	in     *instance.Instance
	store  *repository.Store
	leases *lease.Store
	load   Load
	apps   *instance.Apps // each app's Store reads its tokens
	runs   Runs
	opt    Options

	wake  chan struct{} // the planner: broadcasts to plan
	plans planSet       // plans running here
	late  lateUsers     // counts of users lost with their planner (users.go)
}

// New builds a Planner; Start starts it.
func New(in *instance.Instance, store *repository.Store, leases *lease.Store, apps *instance.Apps, runs Runs, opt Options) *Planner {
	if opt.Changed == nil {
		opt.Changed = func(uint64) {}
	}
	return &Planner{in: in, store: store, leases: leases, load: apps, apps: apps, runs: runs, opt: opt, wake: make(chan struct{}, 1)}
}

// Start launches the planner, which plans broadcasts (and resumes the plans
// of a crashed instance), in the instance's group.
func (s *Planner) Start() { s.in.Group.Go(s.loop) }

// Plan steps: planStepRows targets a step. Only a short user_ids list
// (planNowUsers) is planned inside the submit itself (Inline), so that a
// one-user transactional send waits for nothing.
const (
	// planStepRows is how many targets one plan step reads: a primary-key
	// range of the tokens table, tens of milliseconds on a large table.
	planStepRows = 20000
	// namedStepRows is the same for a named audience, whose pages are its
	// own SQL with all of its columns.
	namedStepRows = 5000
	// planLead is how far ahead of its sends, in seconds of the project's
	// budget, a plan may run at full speed while this instance sends:
	// beyond it, the plan yields (see rest) so as not to take the CPU and
	// the database from the sends it is ahead of.
	planLead = 5
	// planYield bounds a rest: at most this many times as long as the step
	// took (a tenth of the plan's speed, when the sends never leave room).
	planYield = 9
	// planRestMax bounds a plan's rests in all: the sends beside it get the
	// plan's first rests, and the people waiting on the total the rest.
	// The plan of an "all" of 10M tokens rests about 24 s without it on
	// an idle 2-core machine, a named audience's about 40 s (make
	// bench-scale), where a minute is the promise.
	planRestMax = 15 * time.Second
	// planAttempts bounds the failed attempts at planning a broadcast
	// (its audience cannot be read: an error in the deployment's SQL, a
	// table gone) before it ends failed with the reason.
	planAttempts = 5
)

// loop claims the plans of broadcasts that need planning (this
// instance's submits at once, any instance's when their planner died or
// gave up) and runs each in a goroutine of its own, at most PlanParallel
// at a time (more than one: a plan of millions of targets must not keep a
// small one waiting). It returns when claiming stops.
func (s *Planner) loop() {
	if s.opt.PlanParallel <= 0 {
		return // the other instances plan
	}
	idle := time.NewTimer(0)
	defer idle.Stop()
	slots := make(chan struct{}, s.opt.PlanParallel)
	for {
		var pc *lease.PlanClaim
		var err error
		select {
		case slots <- struct{}{}:
			pc, err = s.claimPlan()
			if pc == nil {
				<-slots
			}
		default: // every slot busy: wait for one
		}
		if pc == nil {
			s.recountLate()
			if !s.in.Idle(idle, s.opt.PollInterval, s.wake, "a plan", err) {
				return
			}
			continue
		}
		s.plans.add(pc.BroadcastID)
		if !s.in.Group.Go(func() {
			defer func() {
				s.plans.remove(pc.BroadcastID)
				<-slots
				s.Wake()
			}()
			s.runPlan(pc)
		}) {
			s.plans.remove(pc.BroadcastID)
			return // stopping: the plan's lease expires and any instance resumes it
		}
	}
}

func (s *Planner) claimPlan() (*lease.PlanClaim, error) {
	ctx, cancel := context.WithTimeout(s.in.Claiming, s.in.DBTimeout)
	defer cancel()
	return s.leases.ClaimPlan(ctx, s.in.Owner, s.in.Lease, append(s.plans.ids(), s.runs.Refused()...))
}

// Wake has the planner look for plans at once.
func (s *Planner) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// planSet is the plans this instance runs now (never claimed twice here).
type planSet struct {
	mu sync.Mutex
	m  map[uint64]struct{}
}

func (p *planSet) add(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[uint64]struct{}{}
	}
	p.m[id] = struct{}{}
}

func (p *planSet) remove(id uint64) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

func (p *planSet) ids() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]uint64, 0, len(p.m))
	for id := range p.m {
		out = append(out, id)
	}
	return out
}
