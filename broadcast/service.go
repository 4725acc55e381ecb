package broadcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pushfan/fanout"
	"pushfan/internal/logging"
	"pushfan/repository"
)

// Options tunes the service.
type Options struct {
	FlushInterval   time.Duration // how often live counters reach the row
	InvalidateBatch int           // failures per batch write
	DBTimeout       time.Duration // deadline of every database call
}

// Service runs broadcasts. Start it once, Stop it once (Stop is safe twice).
type Service struct {
	store  *repository.Store
	engine *fanout.Engine
	log    *slog.Logger
	opt    Options

	// life is canceled by Stop: every run derives from it, not from the
	// HTTP request that submitted it, so a client hanging up does not
	// cancel a broadcast.
	life     context.Context
	stopLife context.CancelCauseFunc

	mu     sync.Mutex
	runs   map[uint64]*runHandle
	closed bool
	wg     sync.WaitGroup
}

type runHandle struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// New builds a Service.
func New(store *repository.Store, engine *fanout.Engine, log *slog.Logger, opt Options) *Service {
	life, stop := context.WithCancelCause(context.Background())
	return &Service{store: store, engine: engine, log: log, opt: opt, life: life, stopLife: stop, runs: make(map[uint64]*runHandle)}
}

// Start closes out broadcasts that a previous process left running when it
// died: without a durable queue they cannot be resumed, and leaving them
// "running" forever would mislead the admin.
func (s *Service) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	n, err := s.store.FailInterrupted(ctx, "interrupted: the pushfan process running it stopped before it finished", time.Now())
	if err != nil {
		return fmt.Errorf("closing interrupted broadcasts: %w", err)
	}
	if n > 0 {
		s.log.Warn("marked broadcasts interrupted by a previous process as failed", "count", n)
	}
	return nil
}

// Stop cancels every running broadcast (sends in flight finish, bounded by
// the send timeout), waits until their rows are final, and returns. Safe to
// call twice.
func (s *Service) Stop() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopLife(errShutdown)
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
}

// Submit stores the broadcast and starts it in the background; use Wait to
// block for its end.
func (s *Service) Submit(ctx context.Context, req Request) (*repository.Broadcast, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrShuttingDown
	}
	b := &repository.Broadcast{
		Status:             repository.StatusQueued,
		DryRun:             req.DryRun,
		InvalidateOnDryRun: req.InvalidateOnDryRun,
		Message:            req.Message,
		Audience:           req.Audience,
		RequestID:          req.RequestID,
		CreatedBy:          req.CreatedBy,
	}
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	if err := s.store.CreateBroadcast(dbctx, b); err != nil {
		return nil, fmt.Errorf("creating broadcast: %w", err)
	}

	runCtx, stop := context.WithCancelCause(logging.WithRequestID(s.life, req.RequestID))
	h := &runHandle{cancel: stop, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		stop(errShutdown)
		// The row exists; finish it so it does not look queued forever.
		s.finishUnstarted(b.ID)
		return nil, ErrShuttingDown
	}
	s.runs[b.ID] = h
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		defer stop(nil)
		defer func() {
			s.mu.Lock()
			delete(s.runs, b.ID)
			s.mu.Unlock()
			close(h.done)
		}()
		s.execute(runCtx, b)
	}()
	return b, nil
}

func (s *Service) finishUnstarted(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opt.DBTimeout)
	defer cancel()
	if _, err := s.store.FinishBroadcast(ctx, id, repository.StatusFailed, errShutdown.Error(), time.Now()); err != nil {
		s.log.Error("finishing a broadcast submitted during shutdown", "broadcast_id", id, "err", err)
	}
}

// Wait blocks until broadcast id has finished on this instance or ctx
// ends; it reports whether it finished.
func (s *Service) Wait(ctx context.Context, id uint64) bool {
	s.mu.Lock()
	h := s.runs[id]
	s.mu.Unlock()
	if h == nil {
		return true // not running here: already finished
	}
	select {
	case <-h.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// Get returns the stored broadcast (live counters while it runs).
func (s *Service) Get(ctx context.Context, id uint64) (*repository.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	b, err := s.store.GetBroadcast(ctx, id)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	return b, err
}

// Cancel stops a running broadcast: tokens not yet attempted are counted
// canceled. It waits (up to ctx) for the run to settle and returns the row.
func (s *Service) Cancel(ctx context.Context, id uint64) (*repository.Broadcast, error) {
	b, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Status.Final() {
		return b, fmt.Errorf("broadcast %d is %s: %w", id, b.Status, ErrFinished)
	}
	s.mu.Lock()
	h := s.runs[id]
	s.mu.Unlock()
	if h == nil {
		// Between the read above and now it finished, or it was never ours.
		return s.Get(ctx, id)
	}
	h.cancel(errCanceledByAdmin)
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	return s.Get(context.WithoutCancel(ctx), id)
}

// Stats returns totals across broadcasts.
func (s *Service) Stats(ctx context.Context) (repository.Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.Stats(ctx)
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
