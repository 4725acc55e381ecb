package broadcast

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/platform/logging"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
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
	Rules Rules
	Named *audience.Runner
	// StatsTTL caches GET /push/stats totals this long (0: no cache): the
	// query scans every broadcast, and a dashboard polling it must not slow
	// the sends down.
	StatsTTL time.Duration
	// BroadcastTTL caches GET /push/broadcasts/{id} rows this long (0: no
	// cache); see readCache.
	BroadcastTTL time.Duration
	// PreviewTTL keeps audience previews' counts this long (0: no cache);
	// see previewCache.
	PreviewTTL time.Duration
	// HandBackTimeout is how long a chunk may go on being handed back by
	// every instance that claims it (none can run it: a named audience no
	// configuration has) before its broadcast fails.
	HandBackTimeout time.Duration
	// HoldExpiry is how long a held broadcast waits for its release
	// (0: DefaultHoldExpiry); FourEyes requires the releasing token to
	// differ from the creating one.
	HoldExpiry time.Duration
	FourEyes   bool
	// StartSpread offsets the start of scheduled broadcasts and cron fires
	// by up to this much (see startspread.go); 0 starts them on time.
	StartSpread time.Duration
}

// Metrics is what the service reports (see package metrics).
type Metrics interface {
	Committed(succeeded, canceled int64, failed map[string]int64, invalidated int64)
	BroadcastFinished(status, trigger string, took time.Duration)
	ChunkClaimed(takeover bool)
	CheckpointFailed()
	// WriteBackSkipped counts dead tokens a checkpoint stored without
	// their write-back to a mapped schema's table (on_dead kept failing).
	WriteBackSkipped(n int64)
}

type noMetrics struct{}

func (noMetrics) Committed(int64, int64, map[string]int64, int64) {}
func (noMetrics) BroadcastFinished(string, string, time.Duration) {}
func (noMetrics) ChunkClaimed(bool)                               {}
func (noMetrics) CheckpointFailed()                               {}
func (noMetrics) WriteBackSkipped(int64)                          {}

// Service runs broadcasts: it takes submits, and its dispatcher claims and
// runs chunks. Start starts the dispatcher; Stop stops it (safe twice).
type Service struct {
	store  *repository.Store
	leases *lease.Store
	engine *fanout.Engine
	log    *slog.Logger
	opt    Options
	now    func() time.Time

	// Stopping is two steps with a context each, as in river: claiming
	// ends first (no chunk claimed, no broadcast promoted, no submit
	// taken), then running, the parent of every chunk run, is canceled with
	// errShutdown so runs checkpoint and release their chunks.
	claiming     context.Context
	stopClaiming context.CancelFunc
	running      context.Context
	stopRunning  context.CancelCauseFunc
	stopping     atomic.Bool
	started      atomic.Bool
	group        lifecycle.Group // every goroutine of the service
	wake         chan struct{}   // the dispatcher: chunks to claim
	planWake     chan struct{}   // the planner: broadcasts to plan

	statsMu sync.Mutex // also makes concurrent callers share one query
	statsAt time.Time
	stats   model.Stats

	reads   readCache
	lanes   *lanes   // chunk slots by class
	pacer   *pacer   // paced broadcasts' rates
	runs    runSet   // chunks running here
	plans   planSet  // plans running here
	refused refusals // broadcasts this instance handed back

	previews previewCache // audience previews' counts
}

// New builds a Service.
func New(store *repository.Store, leases *lease.Store, engine *fanout.Engine, log *slog.Logger, opt Options) *Service {
	if opt.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opt.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if len(opt.Owner) > 64 {
		opt.Owner = opt.Owner[:64]
	}
	opt.ChunkParallel = max(opt.ChunkParallel, 1)
	if opt.PlanParallel == 0 {
		opt.PlanParallel = 2
	}
	if opt.Metrics == nil {
		opt.Metrics = noMetrics{}
	}
	if opt.HandBackTimeout <= 0 {
		opt.HandBackTimeout = 10 * time.Minute
	}
	claiming, stopClaiming := context.WithCancel(context.Background())
	running, stopRunning := context.WithCancelCause(context.Background())
	s := &Service{
		store: store, leases: leases, engine: engine, log: log.With("instance", opt.Owner), opt: opt, now: time.Now,
		claiming: claiming, stopClaiming: stopClaiming,
		running: running, stopRunning: stopRunning,
		wake:     make(chan struct{}, 1),
		planWake: make(chan struct{}, 1),
		reads:    readCache{ttl: opt.BroadcastTTL},
		lanes:    newLanes(opt.ChunkParallel),
	}
	s.previews.ttl = opt.PreviewTTL
	s.pacer = newPacer(leases, opt.Rules.RateLimit, s.log)
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
	s.group.Go(s.dispatch)
	s.group.Go(s.planner)
	s.group.Go(s.promote)
	s.group.Go(func() { s.pacer.run(s.running) })
}

// ExpectedFinish is when running broadcast b should end (see the function
// of that name), by this service's budget and clock.
func (s *Service) ExpectedFinish(b *model.Broadcast) *time.Time {
	return ExpectedFinish(b, s.opt.Rules.RateLimit, s.now())
}

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
		s.reads.forget(id)
		s.log.InfoContext(ctx, "scheduled broadcast is due: planning", "broadcast_id", id)
	}
	if len(ids) > 0 {
		s.wakePlanner()
	}
	return err
}

func (s *Service) promoteWaiting(ctx context.Context) error {
	for {
		n, err := s.leases.PromoteWaiting(ctx, 500)
		if n > 0 {
			s.poke()
		}
		if err != nil || n < 500 {
			return err
		}
	}
}

func (s *Service) finishStranded(ctx context.Context) error {
	ids, err := s.leases.Unfinished(ctx, 10)
	for _, id := range ids {
		s.finishBroadcast(s.claiming, id)
	}
	return err
}

// List returns broadcasts newest first.
func (s *Service) List(ctx context.Context, f model.ListFilter) ([]*model.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.ListBroadcasts(ctx, f)
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
func (s *Service) halt() {
	s.stopping.Store(true)
	s.stopClaiming()           // stop taking work
	s.stopRunning(errShutdown) // abort the work in flight: checkpoint and release
}

// Validate checks spec by the request rules, with the service's clock for
// send_at: a *FieldError names a broken rule.
func (s *Service) Validate(spec Spec) (Request, error) { return s.opt.Rules.Validate(spec, s.now()) }

// Request is a validated broadcast submission.
type Request struct {
	Message            model.Message
	Audience           model.Audience
	DryRun             bool
	InvalidateOnDryRun bool
	RequestID          string
	CreatedBy          string
	// IdempotencyKey, with RequestHash (a digest of the request), makes a
	// repeated submit return the first broadcast instead of sending again.
	IdempotencyKey string
	RequestHash    string
	// SendAt schedules the broadcast (status scheduled until then).
	SendAt *time.Time
	// Trigger is api, schedule, cron or resend; JobName and FireTime name a
	// cron fire.
	Trigger  string
	JobName  string
	FireTime *time.Time
	// Class and pacing (see model.Broadcast).
	Class       string
	MaxRate     float64
	DeliverOver time.Duration
	// Hold stores the broadcast held until Release; ParentID names the
	// broadcast a resend goes over.
	Hold     bool
	ParentID uint64
}

// Submit stores the broadcast and its chunks; the dispatchers (of any
// instance) send it. A repeat of an idempotent request returns the
// original broadcast and existing=true.
func (s *Service) Submit(ctx context.Context, req Request) (b *model.Broadcast, existing bool, err error) {
	if req.IdempotencyKey != "" && req.RequestHash == "" {
		req.RequestHash = requestHash(req)
	}
	if s.stopping.Load() {
		return nil, false, ErrShuttingDown
	}
	if req.IdempotencyKey != "" {
		if b, err := s.existing(ctx, req); b != nil || err != nil {
			return b, b != nil, err
		}
	}
	b = &model.Broadcast{
		DryRun:             req.DryRun,
		InvalidateOnDryRun: req.InvalidateOnDryRun,
		Message:            req.Message,
		Audience:           req.Audience,
		RequestID:          req.RequestID,
		CreatedBy:          req.CreatedBy,
		IdempotencyKey:     req.IdempotencyKey,
		RequestHash:        req.RequestHash,
		SendAt:             req.SendAt,
		Trigger:            req.Trigger,
		JobName:            req.JobName,
		FireTime:           req.FireTime,
		Class:              req.Class,
		MaxRate:            req.MaxRate,
		DeliverOver:        req.DeliverOver,
		ParentID:           req.ParentID,
	}
	if req.Hold {
		at := s.now().Add(s.holdExpiry()).UTC()
		b.HoldExpiresAt = &at
	}
	if b.Trigger == "" {
		b.Trigger = "api"
		if b.SendAt != nil {
			b.Trigger = "schedule"
		}
	}
	// The token makes the submit safe to retry: a commit whose answer was
	// lost is found by it, and its unique key stops a second row.
	b.SubmitToken = lease.NewToken()
	b.StartsAt = s.startsAt(b)
	err = s.retryDB(ctx, "submitting broadcast", func(c context.Context) error {
		err := s.leases.Submit(c, b, s.planNow)
		if err == nil || errors.Is(err, repository.ErrDuplicateKey) {
			return err
		}
		found, ferr := s.store.FindBySubmitToken(c, b.SubmitToken)
		if ferr != nil {
			return err // not stored (or unknown yet): try again
		}
		s.log.WarnContext(ctx, "a submit whose commit answer was lost had been stored", "broadcast_id", found.ID, "err", err)
		*b = *found
		return nil
	})
	if errors.Is(err, repository.ErrDuplicateKey) {
		// A concurrent request with the same key won the insert, or our own
		// first attempt did and its answer was lost.
		found, err := s.existing(ctx, req)
		if err != nil || found == nil || found.SubmitToken != b.SubmitToken {
			return found, found != nil, err
		}
		b = found
	} else if err != nil {
		return nil, false, err
	}
	log := s.log.With("broadcast_id", b.ID)
	if b.Status == model.StatusHeld {
		s.held(logging.WithRequestID(s.claiming, req.RequestID), b)
		return b, false, nil
	}
	switch b.Status {
	case model.StatusScheduled:
		log.InfoContext(ctx, "broadcast scheduled", "send_at", b.SendAt, "starts_at", b.StartsAt, "trigger", b.Trigger)
	case model.StatusPlanning:
		log.InfoContext(ctx, "broadcast stored; planning its audience", "dry_run", b.DryRun, "trigger", b.Trigger)
		s.wakePlanner()
	default:
		log.InfoContext(ctx, "broadcast queued", "targeted", b.Targeted, "max_token_id", b.MaxTokenID, "dry_run", b.DryRun, "trigger", b.Trigger)
		s.finishBroadcast(logging.WithRequestID(s.claiming, req.RequestID), b.ID) // nobody in the audience: it ends at once
		s.poke()
	}
	return b, false, nil
}

// finishBroadcast ends the broadcast if it is planned and no chunk is left
// open (one row read when not). Any instance may call it any number of
// times; one call finishes the broadcast.
func (s *Service) finishBroadcast(ctx context.Context, id uint64) {
	var finished bool
	if err := s.retryDB(ctx, "finishing broadcast", func(c context.Context) (err error) {
		finished, err = s.leases.Finish(c, id)
		return err
	}); err != nil {
		s.log.ErrorContext(ctx, "finishing the broadcast failed; the next chunk to end retries", "broadcast_id", id, "err", err)
		return
	}
	if !finished {
		return
	}
	s.reads.forget(id)
	b, err := s.Get(ctx, id)
	if err != nil {
		return
	}
	var took time.Duration
	if b.StartedAt != nil && b.FinishedAt != nil {
		took = b.FinishedAt.Sub(*b.StartedAt)
	}
	s.opt.Metrics.BroadcastFinished(string(b.Status), b.Trigger, took)
	s.log.InfoContext(ctx, "broadcast finished", "broadcast_id", id, "status", b.Status, "targeted", b.Targeted,
		"succeeded", b.Succeeded, "failed", b.Failed, "canceled", b.Canceled, "invalidated", b.Invalidated)
}

func (s *Service) existing(ctx context.Context, req Request) (*model.Broadcast, error) {
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	b, err := s.store.FindByIdempotencyKey(dbctx, req.IdempotencyKey)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b.RequestHash != req.RequestHash {
		return nil, fmt.Errorf("key %q belongs to broadcast %d: %w", req.IdempotencyKey, b.ID, ErrIdempotencyConflict)
	}
	return b, nil
}

// poke wakes the dispatcher (new work was submitted here).
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until the broadcast is final, ctx ends or the service stops;
// it reports whether the broadcast is final. Any instance may be running
// it: the row is the truth. When ctx has a deadline that the broadcast
// cannot make (see cannotFinishBy), it returns at once instead of holding
// the caller for nothing.
func (s *Service) Wait(ctx context.Context, id uint64) (bool, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := s.Get(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if b.Status.Final() {
			return true, nil
		}
		if deadline, ok := ctx.Deadline(); ok && cannotFinishBy(b, deadline, s.now(), s.opt.Rules.RateLimit) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-s.claiming.Done():
			return false, nil
		case <-t.C:
		}
	}
}

// cannotFinishBy reports whether b, not final, surely cannot finish by
// deadline: it is scheduled or held; some of its targets wait for a later
// instant (local time, quiet hours), or all of them do (a send_at_local
// due in the earliest zone, UTC+14, after the deadline); its deliver_over
// ends after it; or the targets counted so far take longer than is left
// at its max_rate or the project's budget. A canceled one always can.
func cannotFinishBy(b *model.Broadcast, deadline, now time.Time, budget float64) bool {
	if b.CancelRequested {
		return false // a cancel ends it at its chunks' next checkpoints
	}
	if b.Status == model.StatusScheduled || b.Status == model.StatusHeld || b.Waiting > 0 {
		return true
	}
	if l := b.Audience.Local; l != nil && l.At != "" {
		if w, err := time.Parse(localLayout, l.At); err == nil && w.Add(-earliestZone).After(deadline) {
			return true
		}
	}
	start := b.CreatedAt
	if b.StartedAt != nil {
		start = *b.StartedAt
	}
	if b.DeliverOver > 0 && start.Add(b.DeliverOver).After(deadline) {
		return true
	}
	limit := budget
	if b.MaxRate > 0 && (limit <= 0 || b.MaxRate < limit) {
		limit = b.MaxRate
	}
	left := b.Targeted - b.Succeeded - b.Failed - b.Canceled
	return limit > 0 && left > 0 && now.Add(time.Duration(float64(left)/limit*float64(time.Second))).After(deadline)
}

// Get returns the stored broadcast (counters as of the last checkpoints).
func (s *Service) Get(ctx context.Context, id uint64) (*model.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	b, err := s.store.GetBroadcast(ctx, id)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	return b, err
}

// Cancel stops the broadcast on every instance, in any state: a plan still
// running is closed, the chunks nobody runs are closed at once and their
// targets counted canceled from the plan's counts, and every instance
// running one of its chunks stops at its next checkpoint and counts the
// targets it did not attempt as canceled. Cancel waits (up to ctx) until
// the row is final. Canceling an already canceled broadcast answers it.
func (s *Service) Cancel(ctx context.Context, id uint64) (*model.Broadcast, error) {
	err := s.retryDB(ctx, "canceling broadcast", func(c context.Context) error {
		_, err := s.leases.Stop(c, id, "")
		return err
	})
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	case errors.Is(err, lease.ErrFinished):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrFinished)
	case err != nil:
		return nil, err
	}
	s.reads.forget(id)
	s.finishBroadcast(ctx, id)
	s.poke()
	if _, err := s.Wait(ctx, id); err != nil {
		return nil, err
	}
	return s.Get(context.WithoutCancel(ctx), id)
}

// Stats returns totals across broadcasts, at most StatsTTL old.
func (s *Service) Stats(ctx context.Context) (model.Stats, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.opt.StatsTTL > 0 && time.Since(s.statsAt) < s.opt.StatsTTL {
		return s.stats, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	st, err := s.store.Stats(ctx)
	if err != nil {
		return st, err
	}
	s.stats, s.statsAt = st, time.Now()
	return st, nil
}

// Failures lists failed tokens of a broadcast by keyset.
func (s *Service) Failures(ctx context.Context, id uint64, code string, after uint64, limit int) ([]model.Failure, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.ListFailures(ctx, id, code, after, limit)
}
