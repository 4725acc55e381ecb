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
	"pushfan/internal/lifecycle"
	"pushfan/internal/logging"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// Options tunes the service.
type Options struct {
	FlushInterval time.Duration // checkpoint period of a running chunk
	DBTimeout     time.Duration // deadline of every database call
	Lease         time.Duration // a chunk lease; renewed at every checkpoint
	ChunkWidth    uint64        // device token ids per chunk
	MaxChunks     int           // chunks per broadcast at most (wider chunks beyond)
	// ChunkParallel is how many chunks one instance runs at once; they
	// share the engine's workers. More than one hides the tail of a chunk
	// (tokens waiting to retry, the next page being read) behind the other
	// chunks' sends.
	ChunkParallel int
	PollInterval  time.Duration // how often an idle dispatcher looks for work
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
}

type noMetrics struct{}

func (noMetrics) Committed(int64, int64, map[string]int64, int64) {}
func (noMetrics) BroadcastFinished(string, string, time.Duration) {}
func (noMetrics) ChunkClaimed(bool)                               {}
func (noMetrics) CheckpointFailed()                               {}

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
	wake         chan struct{}

	statsMu sync.Mutex // also makes concurrent callers share one query
	statsAt time.Time
	stats   model.Stats

	reads   readCache
	lanes   *lanes   // chunk slots by class
	pacer   *pacer   // paced broadcasts' rates
	runs    runSet   // chunks running here
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
		wake:  make(chan struct{}, 1),
		reads: readCache{ttl: opt.BroadcastTTL},
		lanes: newLanes(opt.ChunkParallel),
	}
	s.previews.ttl = opt.PreviewTTL
	s.pacer = newPacer(leases, opt.Owner, opt.Rules.RateLimit, s.log, func(ctx context.Context, b *model.Broadcast) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return s.estimate(ctx, b)
	})
	return s
}

// Owner is this instance's lease name.
func (s *Service) Owner() string { return s.opt.Owner }

// Start launches the dispatcher, which also resumes chunks that a crashed
// instance left behind once their leases expire, and the promoter of
// scheduled broadcasts. When ctx ends, the service stops as by Stop (the
// engine must be started first). Starting twice does nothing.
func (s *Service) Start(ctx context.Context) {
	if s.started.Swap(true) {
		return
	}
	context.AfterFunc(ctx, s.halt)
	s.group.Go(s.dispatch)
	s.group.Go(s.promote)
	s.group.Go(func() { s.pacer.run(s.running) })
}

// ExpectedFinish is when running broadcast b should end (see the function
// of that name), by this service's budget and clock.
func (s *Service) ExpectedFinish(b *model.Broadcast) *time.Time {
	return ExpectedFinish(b, s.opt.Rules.RateLimit, s.now())
}

// promote turns due scheduled broadcasts into queued ones (on exactly one
// instance each, see Store.PromoteDue) and wakes the dispatcher. It also
// ends broadcasts an instance left behind: canceled ones whose closed
// chunks nobody counted, and ones whose every chunk is done but that
// nobody finished (the instance died between the two commits).
func (s *Service) promote() {
	t := time.NewTicker(min(s.opt.PollInterval, 500*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.claiming.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
		ids, err := s.store.PromoteDue(ctx, s.plan)
		var stranded, more []uint64
		if err == nil {
			err = s.expireHolds(ctx)
		}
		if err == nil {
			stranded, err = s.leases.Unsettled(ctx, 10)
		}
		if err == nil {
			more, err = s.leases.Unfinished(ctx, 10)
			stranded = append(stranded, more...)
		}
		cancel()
		if err != nil {
			if s.claiming.Err() == nil {
				s.log.Warn("promoting scheduled broadcasts failed", "err", err)
			}
			continue
		}
		for _, id := range ids {
			s.log.Info("scheduled broadcast is due: queued", "broadcast_id", id)
			if b, err := s.Get(s.claiming, id); err == nil {
				s.queued(s.claiming, b)
			}
		}
		for _, id := range stranded {
			s.finishBroadcast(s.claiming, id)
		}
		if len(ids) > 0 {
			s.poke()
		}
	}
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
		err := s.store.SubmitBroadcast(c, b, s.plan)
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
	if b.Status == model.StatusScheduled {
		log.InfoContext(ctx, "broadcast scheduled", "send_at", b.SendAt, "starts_at", b.StartsAt, "trigger", b.Trigger)
		return b, false, nil
	}
	log.InfoContext(ctx, "broadcast queued", "max_token_id", b.MaxTokenID, "dry_run", b.DryRun, "trigger", b.Trigger)
	s.queued(logging.WithRequestID(s.claiming, req.RequestID), b)
	s.poke()
	return b, false, nil
}

// queued follows up on a broadcast that just got its chunks: one with
// none (nobody in the audience) finishes at once, and the audience is
// counted in the background (on a million tokens that takes seconds, and
// the admin should not wait for an estimate).
func (s *Service) queued(ctx context.Context, b *model.Broadcast) {
	s.finishBroadcast(ctx, b.ID)
	s.group.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := s.estimate(ctx, b); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "estimating targeted", "broadcast_id", b.ID, "err", err)
		}
	})
}

// finishBroadcast counts the targets of chunks a cancel closed, then ends
// the broadcast if no chunk is left open. Any instance may call it any
// number of times; one call finishes the broadcast.
func (s *Service) finishBroadcast(ctx context.Context, id uint64) {
	if err := s.settle(ctx, id); err != nil {
		s.log.ErrorContext(ctx, "counting a canceled broadcast's closed chunks failed; the next instance to look retries", "broadcast_id", id, "err", err)
		return
	}
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

// settle counts, as canceled, the targets of the chunks a cancel closed
// before they ran out: a chunk that never ran by its planned count (lease
// does those in one statement), one that ran partly by reading what it did
// not reach. Each count and each batch of 100 gets its own deadline, so a
// broadcast with thousands of closed chunks settles in steps. A chunk whose
// audience this instance cannot read is left to one that can, until
// HandBackTimeout has passed without any: then it closes uncounted.
func (s *Service) settle(ctx context.Context, id uint64) error {
	var closed []lease.Closed
	if err := s.retryDB(ctx, "listing closed chunks", func(c context.Context) (err error) {
		closed, err = s.leases.ClosedChunks(c, id)
		return err
	}); err != nil || len(closed) == 0 {
		return err
	}
	var b *model.Broadcast
	if err := s.retryDB(ctx, "loading broadcast", func(c context.Context) (err error) {
		b, err = s.store.GetBroadcast(c, id)
		return err
	}); err != nil {
		return err
	}
	flush := func(ss []lease.Settlement) error {
		return s.retryDB(ctx, "settling closed chunks", func(c context.Context) error { return s.leases.Settle(c, id, ss) })
	}
	var batch []lease.Settlement
	for _, c := range closed {
		if c.Counted() {
			continue // Settle counts it by its planned targets
		}
		st := lease.Settlement{Closed: c}
		src, srcErr := s.source(b, c.Hi, c.Zones)
		if srcErr != nil {
			var waited time.Duration
			if err := s.retryDB(ctx, "recording an uncountable chunk", func(cx context.Context) (err error) {
				waited, err = s.leases.CannotCount(cx, c, srcErr.Error())
				return err
			}); err != nil {
				return err
			}
			if waited < s.opt.HandBackTimeout {
				continue // another instance may be able to count it
			}
			s.log.WarnContext(ctx, "no instance could count a closed chunk's targets; closing it uncounted", "broadcast_id", id, "chunk", c.Seq, "err", srcErr)
		} else if err := s.retryDB(ctx, "counting a closed chunk", func(cx context.Context) (err error) {
			st.Canceled, err = countRemaining(cx, src, c.Cursor, toEngine(c.Done))
			return err
		}); err != nil {
			return err
		}
		if batch = append(batch, st); len(batch) == 100 {
			if err := flush(batch); err != nil {
				return err
			}
			batch = nil
		}
	}
	return flush(batch)
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
// it: the row is the truth.
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
		select {
		case <-ctx.Done():
			return false, nil
		case <-s.claiming.Done():
			return false, nil
		case <-t.C:
		}
	}
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

// Cancel stops the broadcast on every instance: the chunks nobody runs are
// closed at once and their targets counted canceled, and every instance
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
