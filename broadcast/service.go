package broadcast

import (
	"context"
	"crypto/rand"
	"database/sql"
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
	"pushfan/caps"
	"pushfan/engagement"
	"pushfan/internal/platform/lifecycle"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/webhook"
)

// Options tunes the service.
type Options struct {
	FlushInterval time.Duration // checkpoint period of a running chunk
	DBTimeout     time.Duration // deadline of every database call
	Lease         time.Duration // a chunk lease; renewed at every checkpoint
	ChunkWidth    uint64        // targets per chunk
	MaxChunks     int           // chunks per broadcast at most (wider chunks beyond)
	// ChunkParallel is how many chunks one instance runs at once; they
	// share the engine's workers. More than one hides the tail of a chunk
	// (tokens waiting to retry, the next page being read) behind the other
	// chunks' sends.
	ChunkParallel int
	// PlanParallel is how many broadcasts this instance plans at once (0:
	// 2; negative: none, the other instances plan them).
	PlanParallel int
	// PlanRetry is the first wait before a failed plan is tried again (it
	// doubles per failure; 0: a second).
	PlanRetry    time.Duration
	PollInterval time.Duration // how often an idle dispatcher looks for work
	// Owner names this instance in leases; empty picks host-pid-random.
	Owner string
	// Metrics hears about claims, checkpoints and finished broadcasts.
	Metrics Metrics
	// Rules are the request rules (and the named audiences, checked
	// against the database); Named runs named audiences' SQL.
	Rules rules.Rules
	Named *audience.Runner
	// HandBackTimeout is how long a chunk may go on being handed back by
	// every instance that claims it (none can run it: a named audience no
	// configuration has) before its broadcast fails.
	HandBackTimeout time.Duration
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
	// Tags signs the event token of every send (nil: tracking is off).
	Tags *engagement.Tagger
	// Invalidated, if set, is told a checkpoint's dead tokens in its
	// transaction (the tokens.invalidated webhook).
	Invalidated func(ctx context.Context, tx *sql.Tx, broadcastID uint64, dead []webhook.DeadToken) error
	// Ledger is the frequency caps' (nil: no broadcast is capped).
	Ledger *caps.Ledger
	// Stopped is closed when the service stops taking work (Stop, or a
	// newer release's fence), for the parts that answer beside it: the
	// reads' waits end, test sends are refused (nil: a latch of its own).
	Stopped *lifecycle.Latch
}

// Metrics is what the service reports (see package metrics).
type Metrics = run.Metrics

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
	stopping     *lifecycle.Latch // opt.Stopped
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
	if opt.PlanParallel == 0 {
		opt.PlanParallel = 2
	}
	if opt.HandBackTimeout <= 0 {
		opt.HandBackTimeout = 10 * time.Minute
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
	s.runner = run.New(s.in, store, leases, apps, run.Options{
		FlushInterval: opt.FlushInterval, ChunkParallel: opt.ChunkParallel, PollInterval: opt.PollInterval,
		HandBackTimeout: opt.HandBackTimeout, RateLimit: opt.Rules.RateLimit, Metrics: opt.Metrics,
		Bind: opt.Rules.Bind, Named: opt.Named, Changed: rd.Forget, Tags: opt.Tags, Invalidated: opt.Invalidated,
		Ledger: opt.Ledger, DefaultZone: opt.Rules.Zone(),
	})
	s.planner = plan.New(s.in, store, leases, apps, s.runner, plan.Options{
		ChunkWidth: opt.ChunkWidth, MaxChunks: opt.MaxChunks, PlanParallel: opt.PlanParallel, PlanRetry: opt.PlanRetry,
		PollInterval: opt.PollInterval, HandBackTimeout: opt.HandBackTimeout, RateLimit: opt.Rules.RateLimit,
		DefaultZone: opt.Rules.Zone(), Bind: opt.Rules.Bind, Named: opt.Named, Changed: rd.Forget,
	})
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
func (s *Service) Cancel(ctx context.Context, id uint64) (*model.Broadcast, error) {
	err := s.in.RetryDB(ctx, "canceling broadcast", func(c context.Context) error {
		_, err := s.leases.Stop(c, id, "")
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
