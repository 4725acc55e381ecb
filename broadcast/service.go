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
	"pushfan/internal/logging"
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
	// Audiences are the named SQL audiences, checked against the database.
	Audiences map[string]*audience.Audience
	// StatsTTL caches GET /push/stats totals this long (0: no cache): the
	// query scans every broadcast, and a dashboard polling it must not slow
	// the sends down.
	StatsTTL time.Duration
	// BroadcastTTL caches GET /push/broadcasts/{id} rows this long (0: no
	// cache); see readCache.
	BroadcastTTL time.Duration
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

// Service runs broadcasts. Start it once, Stop it once (Stop is safe twice).
type Service struct {
	store  *repository.Store
	engine *fanout.Engine
	log    *slog.Logger
	opt    Options

	// claiming ends when Stop begins: no new chunk is claimed.
	claiming     context.Context
	stopClaiming context.CancelFunc
	// running is the parent of every chunk run; Stop cancels it with
	// errShutdown, so runs checkpoint and release their chunks.
	running     context.Context
	stopRunning context.CancelCauseFunc
	stopping    atomic.Bool
	stopOnce    sync.Once
	wg          sync.WaitGroup
	wake        chan struct{}
	started     atomic.Bool

	statsMu sync.Mutex // also makes concurrent callers share one query
	statsAt time.Time
	stats   repository.Stats

	reads readCache
}

// New builds a Service.
func New(store *repository.Store, engine *fanout.Engine, log *slog.Logger, opt Options) *Service {
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
	claiming, stopClaiming := context.WithCancel(context.Background())
	running, stopRunning := context.WithCancelCause(context.Background())
	return &Service{
		store: store, engine: engine, log: log.With("instance", opt.Owner), opt: opt,
		claiming: claiming, stopClaiming: stopClaiming,
		running: running, stopRunning: stopRunning,
		wake:  make(chan struct{}, 1),
		reads: readCache{ttl: opt.BroadcastTTL},
	}
}

// Owner is this instance's lease name.
func (s *Service) Owner() string { return s.opt.Owner }

// Start launches the dispatcher, which also resumes chunks that a crashed
// instance left behind once their leases expire.
func (s *Service) Start() {
	if s.started.Swap(true) {
		return
	}
	s.wg.Go(s.dispatch)
	s.wg.Go(s.promote)
}

// promote turns due scheduled broadcasts into queued ones (on exactly one
// instance each, see Store.PromoteDue) and wakes the dispatcher.
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
		ids, err := s.store.PromoteDue(ctx, s.opt.ChunkWidth, s.opt.MaxChunks)
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
				s.wg.Go(func() { s.estimateTargeted(s.claiming, b) })
			}
		}
		if len(ids) > 0 {
			s.poke()
		}
	}
}

// List returns broadcasts newest first.
func (s *Service) List(ctx context.Context, f repository.ListFilter) ([]*repository.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.ListBroadcasts(ctx, f)
}

// Stop stops claiming chunks, stops the running ones (sends in flight
// finish, bounded by the send timeout), checkpoints them and releases their
// leases so another instance continues at once, and returns when every
// goroutine has exited. Safe to call twice.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		s.stopClaiming()
		s.stopRunning(errShutdown)
	})
	s.wg.Wait()
}

// Request is a validated broadcast submission.
type Request struct {
	Message            repository.Message
	Audience           repository.Audience
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
	// Trigger is api, schedule or cron; JobName and FireTime name a cron fire.
	Trigger  string
	JobName  string
	FireTime *time.Time
}

// Submit stores the broadcast and its chunks; the dispatchers (of any
// instance) send it. A repeat of an idempotent request returns the
// original broadcast and existing=true.
func (s *Service) Submit(ctx context.Context, req Request) (b *repository.Broadcast, existing bool, err error) {
	if s.stopping.Load() {
		return nil, false, ErrShuttingDown
	}
	if req.IdempotencyKey != "" {
		if b, err := s.existing(ctx, req); b != nil || err != nil {
			return b, b != nil, err
		}
	}
	b = &repository.Broadcast{
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
	}
	if b.Trigger == "" {
		b.Trigger = "api"
		if b.SendAt != nil {
			b.Trigger = "schedule"
		}
	}
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	err = s.store.SubmitBroadcast(dbctx, b, s.opt.ChunkWidth, s.opt.MaxChunks)
	if errors.Is(err, repository.ErrDuplicateKey) {
		// A concurrent request with the same key won the insert.
		b, err := s.existing(ctx, req)
		return b, b != nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("submitting broadcast: %w", err)
	}
	log := s.log.With("broadcast_id", b.ID)
	if b.Status == repository.StatusScheduled {
		log.InfoContext(ctx, "broadcast scheduled", "send_at", b.SendAt, "trigger", b.Trigger)
		return b, false, nil
	}
	log.InfoContext(ctx, "broadcast queued", "max_token_id", b.MaxTokenID, "dry_run", b.DryRun, "trigger", b.Trigger)
	// Count the audience in the background: on a million tokens it takes
	// seconds, and the admin should not wait for an estimate.
	s.wg.Go(func() { s.estimateTargeted(logging.WithRequestID(s.claiming, req.RequestID), b) })
	if _, err := s.store.FinishIfDone(dbctx, b.ID); err != nil { // no tokens at all: done already
		log.WarnContext(ctx, "checking an empty broadcast", "err", err)
	}
	s.poke()
	return b, false, nil
}

func (s *Service) existing(ctx context.Context, req Request) (*repository.Broadcast, error) {
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

func (s *Service) estimateTargeted(ctx context.Context, b *repository.Broadcast) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n, err := s.estimate(ctx, b)
	if err == nil {
		err = s.store.SetLiveTargeted(ctx, b.ID, n)
	}
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "estimating targeted", "broadcast_id", b.ID, "err", err)
	}
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
func (s *Service) Get(ctx context.Context, id uint64) (*repository.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	b, err := s.store.GetBroadcast(ctx, id)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	return b, err
}

// Cancel flags the broadcast canceled; every instance running one of its
// chunks stops at its next checkpoint and counts the targets it did not
// attempt as canceled. Cancel waits (up to ctx) until the row is final.
func (s *Service) Cancel(ctx context.Context, id uint64) (*repository.Broadcast, error) {
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	err := s.store.RequestCancel(dbctx, id)
	cancel()
	switch {
	case errors.Is(err, repository.ErrNotFound):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	case errors.Is(err, repository.ErrFinished):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrFinished)
	case err != nil:
		return nil, err
	}
	s.reads.forget(id)
	s.poke() // unclaimed chunks are closed by whoever claims them next
	if _, err := s.Wait(ctx, id); err != nil {
		return nil, err
	}
	return s.Get(context.WithoutCancel(ctx), id)
}

// Stats returns totals across broadcasts, at most StatsTTL old.
func (s *Service) Stats(ctx context.Context) (repository.Stats, error) {
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
func (s *Service) Failures(ctx context.Context, id uint64, code string, after uint64, limit int) ([]repository.Failure, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.ListFailures(ctx, id, code, after, limit)
}
