package broadcast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"pushfan/fanout"
	"pushfan/internal/logging"
	"pushfan/repository"
)

// chunkRun is one claimed chunk being sent by this instance.
type chunkRun struct {
	s    *Service
	c    *repository.Chunk
	b    *repository.Broadcast
	p    *fanout.Progress
	sink *sink
	log  *slog.Logger
	stop context.CancelCauseFunc
	// pending is what has been committed by the engine but not yet stored.
	pending repository.Checkpoint
	// count counts the chunk's targets after a cursor (never attempted).
	count func(ctx context.Context, after uint64) (int64, error)
}

// runChunk sends one chunk from its checkpoint to its end, or until the
// broadcast is canceled, the instance stops, or the lease is lost.
func (s *Service) runChunk(c *repository.Chunk) {
	bg := context.WithoutCancel(s.running)
	var b *repository.Broadcast
	if err := s.retryDB(bg, "loading broadcast", func(ctx context.Context) (err error) {
		b, err = s.store.GetBroadcast(ctx, c.BroadcastID)
		return err
	}); err != nil {
		s.log.Error("chunk claimed but its broadcast cannot be read; the lease will expire and it will be retried", "broadcast_id", c.BroadcastID, "err", err)
		return
	}
	ctx, stop := context.WithCancelCause(logging.WithRequestID(s.running, b.RequestID))
	defer stop(nil)
	r := &chunkRun{
		s: s, c: c, b: b, p: &fanout.Progress{}, stop: stop,
		sink: newSink(b.ID, !b.DryRun || b.InvalidateOnDryRun),
		log:  s.log.With("broadcast_id", b.ID, "chunk", c.Seq),
	}
	if c.Takeover {
		r.log.WarnContext(ctx, "took over a chunk whose lease expired", "resume_after", c.Cursor)
	}
	if b.CancelRequested || b.Status.Final() {
		// Canceled (or failed) before this chunk ran: nothing is attempted.
		r.finish(bg, errCanceled)
		return
	}

	msg := &fanout.Message{
		Title: b.Message.Title, Body: b.Message.Body, Image: b.Message.Image, Data: b.Message.Data,
		CollapseKey: "pushfan-" + strconv.FormatUint(b.ID, 10),
		DryRun:      b.DryRun,
	}
	src, count, err := s.source(b, c.HiID)
	var personalize fanout.Personalizer
	if err == nil {
		personalize, err = personalizer(b, msg)
	}
	if err != nil {
		// The broadcast cannot be sent by anyone with this configuration.
		r.log.ErrorContext(ctx, "broadcast cannot run", "err", err)
		r.finish(bg, &fanout.ErrFatal{Outcome: fanout.SendError{Code: "CONFIG_ERROR", Detail: err.Error()}})
		return
	}
	r.count = count

	checkpointsDone := make(chan struct{})
	go func() {
		defer close(checkpointsDone)
		r.checkpointLoop(ctx)
	}()
	runErr := s.engine.Run(ctx, fanout.Job{
		BroadcastID: b.ID,
		Message:     msg,
		Source:      src,
		After:       c.Cursor,
		Observer:    r.sink,
		Progress:    r.p,
		Personalize: personalize,
	})
	stop(runErr) // ends the checkpoint loop (a no-op cause if already stopped)
	<-checkpointsDone
	r.finish(bg, runErr)
}

// checkpointLoop stores progress every FlushInterval and renews the lease;
// it stops the run when the lease is lost or the broadcast canceled.
func (r *chunkRun) checkpointLoop(ctx context.Context) {
	t := time.NewTicker(r.s.opt.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Resumable: a target canceled by a stop that is not yet visible
		// here must stay unfinished work, not become a "canceled" outcome.
		res, err := r.checkpoint(context.WithoutCancel(ctx), true, repository.KeepLease)
		switch {
		case errors.Is(err, repository.ErrLeaseLost):
			r.log.WarnContext(ctx, "lease lost: another instance took this chunk over; stopping")
			r.stop(errLeaseLost)
			return
		case err != nil:
			// The data stays for the next checkpoint; the lease has slack.
			r.log.WarnContext(ctx, "checkpoint failed, will retry", "err", err)
		case res.CancelRequested:
			r.stop(errCanceled)
			return
		}
	}
}

// checkpoint stores the outcomes committed since the last successful
// checkpoint (a failed one's outcomes are kept and sent again).
func (r *chunkRun) checkpoint(ctx context.Context, resumable bool, end repository.ChunkEnd) (repository.CheckpointResult, error) {
	cp := r.next(resumable, end)
	dbctx, cancel := context.WithTimeout(ctx, r.s.opt.DBTimeout)
	defer cancel()
	res, err := r.s.store.Checkpoint(dbctx, r.c, r.s.opt.Owner, cp)
	if err == nil {
		r.stored(cp, res)
	} else if !errors.Is(err, repository.ErrLeaseLost) {
		r.s.opt.Metrics.CheckpointFailed()
	}
	return res, err
}

// stored clears what a successful checkpoint wrote and reports it.
func (r *chunkRun) stored(cp repository.Checkpoint, res repository.CheckpointResult) {
	r.pending = repository.Checkpoint{}
	r.s.opt.Metrics.Committed(cp.Succeeded, cp.Canceled, cp.Errors, res.Invalidated)
}

// next folds the newly committed outcomes into the pending checkpoint.
func (r *chunkRun) next(resumable bool, end repository.ChunkEnd) repository.Checkpoint {
	c := r.p.Commit(resumable)
	fs, dead := r.sink.upTo(c.Cursor)
	p := &r.pending
	if p.Errors == nil {
		p.Errors = map[string]int64{}
	}
	p.From = r.c.Cursor
	p.Cursor = max(c.Cursor, r.c.Cursor)
	p.Succeeded += c.Succeeded
	p.Failed += c.Failed
	p.Canceled += c.Canceled
	for k, v := range c.Errors {
		p.Errors[k] += v
	}
	p.Failures = append(p.Failures, fs...)
	p.Dead = append(p.Dead, dead...)
	p.End = end
	p.Lease = r.s.opt.Lease
	return *p
}

// finish ends the chunk according to why the run stopped.
func (r *chunkRun) finish(ctx context.Context, runErr error) {
	cause := runErr
	var fatal *fanout.ErrFatal
	switch {
	case errors.Is(cause, errLeaseLost):
		return // someone else owns the chunk now; store nothing
	case errors.As(cause, &fatal):
		if err := r.s.retryDB(ctx, "failing broadcast", func(c context.Context) error {
			return r.s.store.FailBroadcast(c, r.b.ID, fatal.Error())
		}); err != nil {
			r.log.ErrorContext(ctx, "could not store the fatal error", "err", err)
		}
	case cause == nil, errors.Is(cause, errCanceled):
	default:
		// Shutdown, or the audience could not be read (database down):
		// store what is certain and hand the rest back.
		r.end(ctx, true, repository.ReleaseChunk, 0)
		r.log.InfoContext(ctx, "chunk released", "reason", cause.Error(), "resume_after", r.c.Cursor)
		return
	}
	// Completed, canceled or failed: every target gets an outcome; those
	// never read from MySQL are canceled.
	var remaining int64
	if cause != nil {
		after := max(r.p.Cursor.Load(), r.c.Cursor)
		count := r.count
		if count == nil { // stopped before its source was built
			_, count, _ = r.s.source(r.b, r.c.HiID)
		}
		if count == nil {
			// The audience cannot be read with this configuration; nothing
			// was attempted and nothing can be counted.
			count = func(context.Context, uint64) (int64, error) { return 0, nil }
			r.log.WarnContext(ctx, "closing a chunk whose audience cannot be read here; its targets are not counted")
		}
		if err := r.s.retryDB(ctx, "counting unattempted targets", func(c context.Context) (err error) {
			remaining, err = count(c, after)
			return err
		}); err != nil {
			r.log.ErrorContext(ctx, "counting unattempted targets failed; releasing the chunk instead", "err", err)
			r.end(ctx, true, repository.ReleaseChunk, 0)
			return
		}
	}
	// Even if this instance could not close the chunk (a lost answer to a
	// commit that happened, a lease lost at the end), whoever did may have
	// been the last: finishing is idempotent and a no-op while chunks are open.
	r.end(ctx, false, repository.DoneChunk, remaining)
	var finished bool
	if err := r.s.retryDB(ctx, "finishing broadcast", func(c context.Context) (err error) {
		finished, err = r.s.store.FinishIfDone(c, r.b.ID)
		return err
	}); err != nil {
		r.log.ErrorContext(ctx, "finishing the broadcast failed; the next chunk to end will retry", "err", err)
	}
	if finished {
		r.s.reads.forget(r.b.ID)
		b, err := r.s.Get(ctx, r.b.ID)
		if err == nil {
			var took time.Duration
			if b.StartedAt != nil && b.FinishedAt != nil {
				took = b.FinishedAt.Sub(*b.StartedAt)
			}
			r.s.opt.Metrics.BroadcastFinished(string(b.Status), b.Trigger, took)
			r.log.InfoContext(ctx, "broadcast finished", "status", b.Status, "targeted", b.Targeted,
				"succeeded", b.Succeeded, "failed", b.Failed, "canceled", b.Canceled, "invalidated", b.Invalidated)
		}
	}
}

// end stores the final checkpoint, retrying through a database blip.
func (r *chunkRun) end(ctx context.Context, resumable bool, how repository.ChunkEnd, remaining int64) {
	cp := r.next(resumable, how)
	if how == repository.DoneChunk {
		cp.Cursor = r.c.HiID
		cp.Canceled += remaining
	}
	lost := false
	err := r.s.retryDB(ctx, "final checkpoint", func(c context.Context) error {
		res, err := r.s.store.Checkpoint(c, r.c, r.s.opt.Owner, cp)
		switch {
		case errors.Is(err, repository.ErrLeaseLost):
			lost = true
			return nil
		case err == nil:
			r.stored(cp, res)
		}
		return err
	})
	switch {
	case err != nil:
		r.log.ErrorContext(ctx, "final checkpoint failed; the lease will expire and another instance resumes the chunk", "err", err)
	case lost:
		r.log.WarnContext(ctx, "lease lost before the final checkpoint; the new holder finishes the chunk")
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

// audienceSource pages the stored audience for the engine, within a chunk.
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
		dst = append(dst, fanout.Target{Cursor: t.TokenID, TokenID: t.TokenID, UserID: t.UserID, Token: t.Token})
	}
	return dst, nil
}
