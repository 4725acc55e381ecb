package broadcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"pushfan/fanout"
	"pushfan/repository"
)

// execute runs one broadcast to its end and leaves the row final.
func (s *Service) execute(ctx context.Context, b *repository.Broadcast) {
	log := s.log.With("broadcast_id", b.ID)
	// Bookkeeping writes must happen even while the run is being canceled.
	bg := context.WithoutCancel(ctx)

	if err := s.retryDB(bg, "starting broadcast", func(c context.Context) error {
		return s.store.StartBroadcast(c, b.ID, time.Now())
	}); err != nil {
		s.finish(bg, log, b.ID, repository.StatusFailed, err.Error())
		return
	}
	// Snapshot the audience's upper bound: tokens registered while the
	// broadcast runs are not part of it, so "targeted" is exact.
	var maxID uint64
	var targeted int64
	err := s.retryDB(bg, "sizing audience", func(c context.Context) (err error) {
		if maxID, err = s.store.MaxTokenID(c); err != nil {
			return err
		}
		targeted, err = s.store.CountAudienceRange(c, b.Audience, 0, maxID)
		if err != nil {
			return err
		}
		return s.store.SetTargeted(c, b.ID, targeted)
	})
	if err != nil {
		s.finish(bg, log, b.ID, repository.StatusFailed, err.Error())
		return
	}
	log.InfoContext(ctx, "broadcast started", "targeted", targeted, "dry_run", b.DryRun)

	p := &fanout.Progress{}
	sk := newSink(b.ID, !b.DryRun || b.InvalidateOnDryRun, s.opt.InvalidateBatch)
	f := &flusher{s: s, id: b.ID, p: p, sink: sk, log: log}
	flushDone := make(chan struct{})
	stopFlush := make(chan struct{})
	go func() {
		defer close(flushDone)
		f.loop(bg, stopFlush)
	}()

	runErr := s.engine.Run(ctx, fanout.Job{
		BroadcastID: b.ID,
		Message: &fanout.Message{
			Title: b.Message.Title, Body: b.Message.Body, Image: b.Message.Image, Data: b.Message.Data,
			CollapseKey: "pushfan-" + strconv.FormatUint(b.ID, 10),
			DryRun:      b.DryRun,
		},
		Source:   &audienceSource{store: s.store, audience: b.Audience, upto: maxID, timeout: s.opt.DBTimeout},
		Observer: sk,
		Progress: p,
	})
	close(stopFlush)
	<-flushDone

	// Targets never read from MySQL because the run stopped early were
	// never attempted: they are canceled too.
	var remaining int64
	if runErr != nil {
		_ = s.retryDB(bg, "counting unattempted targets", func(c context.Context) (err error) {
			remaining, err = s.store.CountAudienceRange(c, b.Audience, p.Cursor.Load(), maxID)
			return err
		})
	}
	f.extraCanceled = remaining
	final := p.Snapshot()
	exactTargeted := final.Attempted + remaining
	if err := s.retryDB(bg, "final flush", func(c context.Context) error {
		if err := f.flush(c); err != nil {
			return err
		}
		return s.store.SetTargeted(c, b.ID, exactTargeted)
	}); err != nil {
		log.ErrorContext(ctx, "final counters could not be stored", "err", err)
	}

	status, msg := outcome(runErr)
	s.finish(bg, log, b.ID, status, msg)
	log.InfoContext(ctx, "broadcast finished", "status", status, "targeted", exactTargeted,
		"succeeded", final.Succeeded, "failed", final.Failed, "canceled", final.Canceled+remaining,
		"retries", final.Retries, "http_sends", final.HTTPSends)
}

// outcome maps how Run ended to the row's status and error text.
func outcome(err error) (repository.Status, string) {
	var fatal *fanout.ErrFatal
	switch {
	case err == nil:
		return repository.StatusCompleted, ""
	case errors.Is(err, errCanceledByAdmin):
		return repository.StatusCanceled, ""
	case errors.As(err, &fatal):
		return repository.StatusFailed, fatal.Error()
	}
	return repository.StatusFailed, err.Error()
}

func (s *Service) finish(ctx context.Context, log *slog.Logger, id uint64, st repository.Status, msg string) {
	if err := s.retryDB(ctx, "finishing broadcast", func(c context.Context) error {
		_, err := s.store.FinishBroadcast(c, id, st, msg, time.Now())
		return err
	}); err != nil {
		log.ErrorContext(ctx, "broadcast could not be marked finished", "status", st, "err", err)
	}
}

// retryDB runs fn with the DB deadline, retrying with backoff for about half
// a minute: a short database outage must not lose a broadcast's outcome.
func (s *Service) retryDB(ctx context.Context, what string, fn func(context.Context) error) error {
	var err error
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
		err = fn(c)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		s.log.WarnContext(ctx, "database call failed, retrying", "what", what, "err", err, "in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 3*time.Second)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// audienceSource pages the stored audience for the engine, bounded by the
// token id snapshot taken at start.
type audienceSource struct {
	store    *repository.Store
	audience repository.Audience
	upto     uint64
	timeout  time.Duration
	buf      []repository.Target // reused: only the engine's producer calls Page
}

func (a *audienceSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	if after >= a.upto {
		return dst, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var err error
	a.buf, err = a.store.AudiencePage(ctx, a.audience, after, limit, a.buf)
	if err != nil {
		return dst, err
	}
	for _, t := range a.buf {
		if t.TokenID > a.upto {
			break
		}
		dst = append(dst, fanout.Target{TokenID: t.TokenID, UserID: t.UserID, Token: t.Token})
	}
	return dst, nil
}
