// Package run is the sending side of broadcasts on one instance: the
// dispatcher claims chunks (package lease: fenced by an epoch, taking over
// expired leases) while this instance has a free slot for them, and runs
// the fanout engine over each from its stored cursor, skipping its done
// ranges. Every FlushInterval a chunk checkpoints every outcome it has, in
// one transaction that also renews the lease; an unconfirmed checkpoint is
// retried unchanged, and the store gate holds new sends while outcomes go
// unstored. The last chunk to end finishes the broadcast.
//
// A kill -9 repeats at most the sends in flight and those since the last
// checkpoint (at-least-once), and counts each target once.
package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/caps"
	"pushfan/engagement"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/webhook"
)

// Options tunes the chunk runs.
type Options struct {
	FlushInterval time.Duration // checkpoint period of a running chunk
	// ChunkParallel is how many chunks of each class one instance runs at
	// once (see lanes).
	ChunkParallel int
	PollInterval  time.Duration // how often an idle dispatcher looks for work
	// HandBackTimeout is how long a broadcast may go on being handed back
	// by every instance before it fails.
	HandBackTimeout time.Duration
	// RateLimit is the project's budget of sends a second (paces share it).
	RateLimit float64
	Metrics   Metrics
	// Bind looks a named audience up and binds its stored parameters;
	// Named runs its SQL.
	Bind  func(model.Audience) (audience.Bound, error)
	Named *audience.Runner
	// Changed is told when a broadcast's row changed here (cached reads
	// of it are stale).
	Changed func(id uint64)
	// Tags signs each send's event token (nil: tracking is off).
	Tags *engagement.Tagger
	// Invalidated, if set, is told a checkpoint's dead tokens in its
	// transaction (the tokens.invalidated webhook).
	Invalidated func(ctx context.Context, tx *sql.Tx, broadcastID uint64, dead []webhook.DeadToken) error
	// Ledger reserves and releases frequency-cap slots (nil: broadcasts
	// are sent uncapped whatever they record); DefaultZone is the local
	// day of users without a zone (nil: UTC).
	Ledger      *caps.Ledger
	DefaultZone *time.Location
}

// Metrics is what the runs report (see package metrics).
type Metrics interface {
	// Committed, Capped and BroadcastFinished count by app (docs/apps.md).
	Committed(app string, succeeded, canceled int64, failed map[string]int64, invalidated int64)
	// Capped counts targets withheld by a frequency cap, users whose
	// reservation was released (their send did not happen), and users
	// sent past a cap (caps.Settled.Over).
	Capped(app string, capped, released, exceeded int64)
	BroadcastFinished(app, status, trigger string, took time.Duration)
	// BroadcastRepaired counts a broadcast the self-repair finished: every
	// chunk of it was done while a counter kept it open (Repair).
	BroadcastRepaired()
	ChunkClaimed(takeover bool)
	CheckpointFailed()
	// CheckpointTook observes one checkpoint's transaction, stored or not.
	CheckpointTook(d time.Duration)
	// WriteBackSkipped counts dead tokens a checkpoint stored without
	// their write-back to a mapped schema's table (on_dead kept failing).
	WriteBackSkipped(n int64)
	// StaleSkipped counts tokens a send's pages left out as stale
	// (PUSHFAN_STALE_AFTER), by app.
	StaleSkipped(app string, n int)
}

type noMetrics struct{}

func (noMetrics) Committed(string, int64, int64, map[string]int64, int64) {}
func (noMetrics) Capped(string, int64, int64, int64)                      {}
func (noMetrics) BroadcastFinished(string, string, string, time.Duration) {}
func (noMetrics) BroadcastRepaired()                                      {}
func (noMetrics) ChunkClaimed(bool)                                       {}
func (noMetrics) CheckpointFailed()                                       {}
func (noMetrics) CheckpointTook(time.Duration)                            {}
func (noMetrics) WriteBackSkipped(int64)                                  {}
func (noMetrics) StaleSkipped(string, int)                                {}

// ErrShutdown is the cause the instance's stop cancels Running with: each
// run checkpoints what it has and releases its chunk.
var ErrShutdown = errors.New("instance shutting down")

// ErrOutdated is the cause when a release built for a newer schema is
// migrating the database (lease.ErrOutdated): each run stores what it has
// and hands its chunk back, for the newer release to go on with.
var ErrOutdated = fmt.Errorf("a newer release is migrating the database: %w", lease.ErrOutdated)

// Causes of a chunk run stopping early.
var (
	errCanceled  = errors.New("broadcast canceled")
	errLeaseLost = errors.New("chunk lease lost to another instance")
)

// Runner claims and runs this instance's chunks.
type Runner struct {
	in     *instance.Instance
	store  *repository.Store
	leases *lease.Store
	apps   *instance.Apps
	opt    Options

	wake  chan struct{}     // the dispatcher: chunks to claim
	lanes map[string]*lanes // chunk slots by app, then by class
	// unstored bounds each app's sends past its runs' stored checkpoints
	// (the store gates'), by app.
	unstored map[string]*unstored
	next     int      // the app the dispatcher asks first (round robin)
	pacer    *pacer   // paced broadcasts' rates
	runs     runSet   // chunks running here
	refused  refusals // broadcasts this instance handed back
}

// New builds a Runner; Start starts it.
func New(in *instance.Instance, store *repository.Store, leases *lease.Store, apps *instance.Apps, opt Options) *Runner {
	opt.ChunkParallel = max(opt.ChunkParallel, 1)
	if opt.Metrics == nil {
		opt.Metrics = noMetrics{}
	}
	if opt.Changed == nil {
		opt.Changed = func(uint64) {}
	}
	s := &Runner{
		in: in, store: store, leases: leases, apps: apps, opt: opt,
		wake:  make(chan struct{}, 1),
		lanes: map[string]*lanes{}, unstored: map[string]*unstored{},
		pacer: newPacer(store, opt.RateLimit, in.Log),
	}
	// Each app has slots of its own: a large bulk broadcast of one app
	// never holds the slots another app's broadcasts run in.
	for _, app := range apps.List() {
		s.lanes[app.Name] = newLanes(opt.ChunkParallel)
		// And a window of unstored sends of its own, shared by its runs
		// only: another app's runs, or their slow commits, never hold it.
		s.unstored[app.Name] = newUnstored(func() int64 {
			return int64(app.Engine.Limit() * window(opt.FlushInterval).Seconds())
		})
	}
	return s
}

// appOf is b's app on this instance. An app this instance does not have
// (a chunk of an app removed from its configuration) is an error, with
// the first app in its place so that the run can hand the chunk back.
func (s *Runner) appOf(b *model.Broadcast) (*instance.App, error) {
	if app, ok := s.apps.Get(b.App); ok {
		return app, nil
	}
	return s.apps.List()[0], fmt.Errorf("app %q is not configured on this instance", b.App)
}

// Start launches the dispatcher, which also resumes chunks that a crashed
// instance left behind once their leases expire, and the pacer, in the
// instance's group (the engine must be started first).
func (s *Runner) Start() {
	s.in.Group.Go(s.dispatch)
	s.in.Group.Go(func() { s.pacer.run(s.in.Running) })
}

// Poke wakes the dispatcher (chunks became claimable).
func (s *Runner) Poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Refuse leaves broadcast id's chunks (and plan) to other instances for a
// while.
func (s *Runner) Refuse(id uint64) { s.refused.add(id, s.in.Now().Add(instance.RefuseFor)) }

// Refused lists the broadcasts this instance leaves to others now.
func (s *Runner) Refused() []uint64 { return s.refused.current(s.in.Now()) }

// Finish ends the broadcast if it is planned and no chunk is left open
// (one row read when not). Any instance may call it any number of times;
// one call finishes the broadcast.
func (s *Runner) Finish(ctx context.Context, id uint64) {
	var finished bool
	if err := s.in.RetryDB(ctx, "finishing broadcast", func(c context.Context) (err error) {
		finished, err = s.leases.Finish(c, id)
		return err
	}); err != nil {
		if errors.Is(err, lease.ErrOutdated) {
			return // the newer release's to finish
		}
		s.in.Log.ErrorContext(ctx, "finishing the broadcast failed; the next chunk to end retries", "broadcast_id", id, "err", err)
		return
	}
	if finished {
		s.finished(ctx, id, "broadcast finished")
	}
}

// Repair finishes broadcast id if every chunk of it is done although its
// open_chunks counter says some are open (lease.Store.Repair: a release
// that does not keep the counter ended chunks beside this one), logs it
// and counts it (pushfan_broadcasts_repaired_total). A broadcast still
// running, or finished meanwhile, is left alone.
func (s *Runner) Repair(ctx context.Context, id uint64) error {
	var counted int64
	var repaired bool
	if err := s.in.RetryDB(ctx, "repairing broadcast", func(c context.Context) (err error) {
		counted, repaired, err = s.leases.Repair(c, id)
		return err
	}); err != nil || !repaired {
		return err
	}
	s.opt.Metrics.BroadcastRepaired()
	s.in.Log.WarnContext(ctx, "repaired a broadcast: every chunk of it was done, but its open_chunks counter kept it open (chunks ended by a release that does not keep it); finished it",
		"broadcast_id", id, "open_chunks", counted)
	s.finished(ctx, id, "broadcast finished by the repair")
	return nil
}

// finished reports a broadcast this instance finished: its cached reads,
// its metrics and a log line.
func (s *Runner) finished(ctx context.Context, id uint64, msg string) {
	s.opt.Changed(id)
	c, cancel := context.WithTimeout(ctx, s.in.DBTimeout)
	b, err := s.store.GetBroadcast(c, id)
	cancel()
	if err != nil {
		return
	}
	var took time.Duration
	if b.StartedAt != nil && b.FinishedAt != nil {
		took = b.FinishedAt.Sub(*b.StartedAt)
	}
	s.opt.Metrics.BroadcastFinished(b.App, string(b.Status), b.Trigger, took)
	s.in.Log.InfoContext(ctx, msg, "broadcast_id", id, "status", b.Status, "targeted", b.Targeted,
		"succeeded", b.Succeeded, "failed", b.Failed, "canceled", b.Canceled, "invalidated", b.Invalidated)
}

// Fail ends a broadcast failed with msg (unless it ended meanwhile).
func (s *Runner) Fail(ctx context.Context, id uint64, msg string) {
	if err := s.in.RetryDB(ctx, "failing broadcast", func(c context.Context) error {
		_, err := s.leases.Stop(c, id, msg)
		if errors.Is(err, lease.ErrFinished) {
			return nil
		}
		return err
	}); err != nil {
		s.in.Log.ErrorContext(ctx, "could not fail the broadcast", "broadcast_id", id, "err", err)
		return
	}
	s.opt.Changed(id)
	s.Finish(ctx, id)
}
