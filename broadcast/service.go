package broadcast

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/broadcast/plan"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/rules"
	"pushfan/broadcast/run"
	"pushfan/internal/platform/lifecycle"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// Options tunes the service. The defaults of its settings are config's
// (the table of variables): New defaults only what config leaves unset
// (Owner, RepairInterval), and HoldExpiry for a caller that leaves it out.
type Options struct {
	DBTimeout time.Duration // deadline of every database call
	Lease     time.Duration // a chunk's or a plan's lease; renewed at every checkpoint
	// PollInterval is how often the promoter sweeps (at most every
	// 500 ms: see promote).
	PollInterval time.Duration
	// Owner names this instance in leases; empty picks host-pid-random.
	Owner string
	// Rules are the request rules (and the named audiences, checked
	// against the database); Named runs named audiences' SQL.
	Rules rules.Rules
	Named *audience.Runner
	// RepairInterval is how often the instance looks for broadcasts whose
	// chunks are all done but that a counter keeps open (0:
	// DefaultRepairInterval; see repair.go).
	RepairInterval time.Duration
	// HoldExpiry is how long a held broadcast waits for its release
	// (0: DefaultHoldExpiry); FourEyes requires the releasing token to
	// differ from the creating one.
	HoldExpiry time.Duration
	FourEyes   bool
	// StartSpread offsets the start of scheduled broadcasts and cron fires
	// by up to this much (see startspread.go); 0 starts them on time.
	StartSpread time.Duration
	// Stopped is closed when the service stops taking work (Stop, or a
	// newer release's fence), for the parts that answer beside it: the
	// reads' waits end, test sends are refused (nil: a latch of its own).
	Stopped *lifecycle.Latch
	// Plan and Run are the planner's and the runs' own options. New gives
	// them what they share with the service: the rules' binding, default
	// zone and budget (Bind, DefaultZone, RateLimit), Named, and Changed
	// (the reads' Forget).
	Plan plan.Options
	Run  run.Options
}

// Service runs broadcasts: it takes submits, and its planner (package
// plan) and dispatcher (package run) plan and run them. Start starts them;
// Stop stops them (safe twice). It reads stored broadcasts through the
// reads, and tells them what it changed.
type Service struct {
	store  *repository.Store
	leases *lease.Store
	apps   *instance.Apps
	reads  *reads.Reader
	log    *slog.Logger
	opt    Options
	now    func() time.Time

	// in is what the planner and the runs share: the two contexts of
	// Stop's two steps (see instance.Instance), the group of every
	// goroutine, the database retries.
	in           *instance.Instance
	claiming     context.Context
	stopClaiming context.CancelFunc
	stopRunning  context.CancelCauseFunc
	stopping     *lifecycle.Latch // opt.Stopped, closed by halt
	started      atomic.Bool
	group        lifecycle.Group // every goroutine of the service

	planner *plan.Planner
	runner  *run.Runner
}

// New builds a Service over the store, the lease store, this instance's
// apps and the reads (rd).
func New(store *repository.Store, leases *lease.Store, apps *instance.Apps, rd *reads.Reader, log *slog.Logger, opt Options) *Service {
	if opt.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opt.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if len(opt.Owner) > 64 {
		opt.Owner = opt.Owner[:64]
	}
	if opt.RepairInterval <= 0 {
		opt.RepairInterval = DefaultRepairInterval
	}
	if opt.Stopped == nil {
		opt.Stopped = new(lifecycle.Latch)
	}
	claiming, stopClaiming := context.WithCancel(context.Background())
	running, stopRunning := context.WithCancelCause(context.Background())
	s := &Service{
		store: store, leases: leases, apps: apps, reads: rd, log: log.With("instance", opt.Owner), opt: opt, now: time.Now,
		claiming: claiming, stopClaiming: stopClaiming, stopRunning: stopRunning, stopping: opt.Stopped,
	}
	s.in = &instance.Instance{
		Owner: opt.Owner, Lease: opt.Lease, DBTimeout: opt.DBTimeout, Log: s.log, Now: s.now,
		Claiming: claiming, Running: running, Group: &s.group,
	}
	ro, po := opt.Run, opt.Plan
	ro.RateLimit, ro.DefaultZone, ro.Bind, ro.Named, ro.Changed = opt.Rules.RateLimit, opt.Rules.Zone(), opt.Rules.Bind, opt.Named, rd.Forget
	po.RateLimit, po.DefaultZone, po.Bind, po.Named, po.Changed = opt.Rules.RateLimit, opt.Rules.Zone(), opt.Rules.Bind, opt.Named, rd.Forget
	s.runner = run.New(s.in, store, leases, apps, ro)
	s.planner = plan.New(s.in, store, leases, apps, s.runner, po)
	leases.OnOutdated(s.retire)
	return s
}

// Owner is this instance's lease name.
func (s *Service) Owner() string { return s.opt.Owner }

// Start launches the dispatcher, which also resumes chunks that a crashed
// instance left behind once their leases expire, the planner, which plans
// broadcasts (and resumes the plans of a crashed instance), and the
// promoter of scheduled broadcasts and waiting chunks. When ctx ends, the
// service stops as by Stop (the engine must be started first). Starting
// twice does nothing.
func (s *Service) Start(ctx context.Context) {
	if s.started.Swap(true) {
		return
	}
	context.AfterFunc(ctx, s.halt)
	s.runner.Start()
	s.planner.Start()
	s.group.Go(s.promote)
	s.group.Go(s.repair)
}

// Stop stops taking work (no chunk claimed, no submit accepted), then
// stops the running chunks: sends in flight finish (bounded by the send
// timeout), each chunk checkpoints every outcome it has and releases its
// lease, so another instance continues at once. It returns when every
// goroutine of the service has exited, or at ctx's deadline with its
// error. Safe twice, and before Start.
func (s *Service) Stop(ctx context.Context) error {
	s.halt()
	return s.group.Wait(ctx)
}

// halt is Stop's two steps, without the wait.
func (s *Service) halt() { s.haltFor(run.ErrShutdown) }

// haltFor is halt with why as the runs' cause.
func (s *Service) haltFor(why error) {
	s.stopping.Close()
	s.stopClaiming()   // stop taking work
	s.stopRunning(why) // abort the work in flight: checkpoint and release
}

// retire stops this instance taking work for good, as Stop does, but the
// API goes on answering: a release built for a newer schema (fence) than
// this one's is migrating the database, or has (lease.ErrOutdated). The
// runs store every outcome they have and hand their chunks back; submits
// and cancels answer 503 (ErrShuttingDown), so that clients retry on an
// instance of the newer release. Called by the lease store, once.
func (s *Service) retire(fence, schema int64) {
	s.log.Warn("a newer release is migrating the database (schema fence above this release's schema): handing every chunk back and taking no more work; reads are still served",
		"fence", fence, "schema", schema)
	s.haltFor(run.ErrOutdated)
}

// Cancel stops the broadcast on every instance, in any state: a plan still
// running is closed, the chunks nobody runs are closed at once and their
// targets counted canceled from the plan's counts, and every instance
// running one of its chunks stops at its next checkpoint and counts the
// targets it did not attempt as canceled. Cancel waits (up to ctx) until
// the row is final. Canceling an already canceled broadcast answers it.
// by names who cancels (canceled_by; the first canceler's name is kept).
func (s *Service) Cancel(ctx context.Context, id uint64, by string) (*model.Broadcast, error) {
	err := s.in.RetryDB(ctx, "canceling broadcast", func(c context.Context) error {
		_, err := s.leases.Cancel(c, id, by)
		return err
	})
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	case errors.Is(err, lease.ErrFinished):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrFinished)
	case err != nil:
		return nil, unavailable(err)
	}
	s.reads.Forget(id)
	s.runner.Finish(ctx, id)
	s.runner.Poke()
	if _, err := s.reads.Wait(ctx, id); err != nil {
		return nil, err
	}
	return s.reads.Get(context.WithoutCancel(ctx), id)
}
