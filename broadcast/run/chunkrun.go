package run

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"pushfan/broadcast/instance"
	"pushfan/broadcast/message"
	"pushfan/caps"
	"pushfan/fanout"
	"pushfan/internal/platform/logging"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/webhook"
)

// chunkRun is one claimed chunk being sent by this instance.
type chunkRun struct {
	s    *Runner
	c    *lease.Claim
	b    *model.Broadcast
	app  *instance.App // b's app: its engine and its tokens
	p    *fanout.Progress
	log  *slog.Logger
	stop context.CancelCauseFunc
	// pending is a checkpoint prepared but not confirmed stored: its commit
	// failed or its outcome is unknown. It is retried exactly as it is
	// before anything newer is prepared (see lease.Store.Checkpoint).
	pending *lease.Checkpoint
	// pendingMark is when pending's outcomes were taken from the engine.
	pendingMark gateMark
	// gate holds the engine's producer while the app's outcomes go
	// unstored (see unstored).
	gate *storeGate
	// wb retries pending's write-back of dead tokens, and leaves out the
	// tokens whose write-back keeps failing (see writeback.go).
	wb writeBacks
	// caps are the run's frequency caps (nil: none); settled is what
	// pending's effects did with its users' reservations (for the
	// metrics and the log once it is stored).
	caps    *capRun
	settled caps.Settled
	// fenced: a takeover fenced this run off, and its checkpoints are
	// stored aside (lease.Result.Fenced).
	fenced bool
	// stale are the stale tokens the pages passed over since the last
	// checkpoint was prepared (stale.go).
	stale staleKept
}

// runChunk sends one chunk from its checkpoint to its end, or until the
// broadcast is canceled, the instance stops, or the lease is lost.
func (s *Runner) runChunk(c *lease.Claim) {
	bg := context.WithoutCancel(s.in.Running)
	var b *model.Broadcast
	if err := s.in.RetryDB(bg, "loading broadcast", func(ctx context.Context) (err error) {
		b, err = s.store.GetBroadcast(ctx, c.BroadcastID)
		return err
	}); err != nil {
		s.in.Log.Error("chunk claimed but its broadcast cannot be read; the lease will expire and it will be retried", "broadcast_id", c.BroadcastID, "err", err)
		return
	}
	ctx, stop := context.WithCancelCause(logging.WithRequestID(s.in.Running, b.RequestID))
	defer stop(nil)
	// Chunks are claimed by app (dispatch), so the app is this instance's;
	// the lookup only fails on a chunk claimed under an older configuration.
	app, appErr := s.appOf(b)
	r := &chunkRun{
		s: s, c: c, b: b, app: app, p: &fanout.Progress{}, stop: stop,
		gate: newStoreGate(s.opt.FlushInterval, time.Now(), s.unstored[app.Name]),
		wb:   writeBacks{lease: s.in.Lease},
		log:  s.in.Log.With("broadcast_id", b.ID, "chunk", c.Seq, "epoch", c.Epoch),
	}
	defer r.gate.close() // after the final checkpoint: its sends count no more
	// Even a run that stops before the engine starts checkpoints the claim's
	// cursor and done ranges, never fewer.
	r.p.Reset(c.Cursor, toEngine(c.Done))
	if c.Takeover {
		r.log.WarnContext(ctx, "took over a chunk whose lease expired", "resume_after", c.Cursor, "done_ranges", len(c.Done))
	}
	var delivery fanout.Delivery
	if appErr == nil {
		delivery = message.Delivery(b, app.Delivery, time.Now())
	}
	msg := message.Engine(b.Message, delivery, b.DryRun)
	msg, tag, err := s.track(b, msg)
	if appErr != nil {
		err = appErr
	}
	var src fanout.Source
	if err == nil {
		src, err = s.source(app, b, c, r.stale.add)
	}
	if err == nil {
		r.caps, err = s.capsOf(ctx, app, b, c)
	}
	var personalize fanout.Personalizer
	var variants *fanout.Variants
	switch {
	case err != nil:
	case len(b.Message.Variants) > 0:
		variants, tag, err = s.abVariants(b, delivery)
	default:
		personalize, variants, err = message.Personalizer(b, msg)
	}
	if personalize != nil && tag != nil {
		personalize = s.trackEach(b, personalize)
	}
	switch {
	case b.CancelRequested || b.Status.Final():
		// Canceled (or failed) before this chunk ran: nothing is attempted,
		// and the plan's count says how many targets are canceled, so even
		// an instance that cannot read the audience closes it.
		r.finish(bg, errCanceled)
		return
	case err != nil:
		// This instance cannot run it (a rolling deploy: another instance
		// may).
		r.handBack(bg, err)
		return
	}
	pace, unpace := s.pacer.join(ctx, b)
	defer unpace()
	checkpointsDone := make(chan struct{})
	go func() {
		defer close(checkpointsDone)
		r.checkpointLoop(ctx)
	}()
	runErr := app.Engine.Run(ctx, fanout.Job{
		BroadcastID: b.ID,
		Message:     msg,
		Source:      src,
		After:       c.Cursor,
		Skip:        toEngine(c.Done),
		Progress:    r.p,
		Personalize: personalize,
		Variants:    variants,
		Urgent:      c.Class == lease.Transactional,
		Pace:        pace,
		Gate:        r.gate,
		Tag:         tag,
		Cap:         r.caps.job(),
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
		res, err := r.checkpoint(context.WithoutCancel(ctx), true, lease.KeepLease, false)
		switch {
		case errors.Is(err, lease.ErrLost):
			r.log.WarnContext(ctx, "lease lost: another instance took this chunk over, or a cancel closed it; stopping", "err", err)
			r.stop(errLeaseLost)
			return
		case err != nil:
			// Kept for the next tick; the lease has slack (and a lease that
			// expired while nobody claimed the chunk is still ours).
			r.log.WarnContext(ctx, "checkpoint failed, will retry it unchanged", "err", err)
		case res.CancelRequested:
			r.stop(errCanceled)
			return
		case res.Outdated:
			// A newer release is migrating the database: store what the
			// run has and hand the chunk back (finish, Release).
			r.stop(ErrOutdated)
			return
		}
	}
}

// checkpoint stores the outcomes committed since the last confirmed
// checkpoint, first retrying an unconfirmed one unchanged. For a Done end
// with cancelRest, the targets never attempted are counted canceled.
func (r *chunkRun) checkpoint(ctx context.Context, resumable bool, end lease.End, cancelRest bool) (lease.Result, error) {
	if r.pending != nil {
		was := r.pending.End
		res, err := r.attempt(ctx)
		if err != nil || was == end {
			return res, err
		}
	}
	r.pendingMark = r.gate.mark()
	cp := r.prepare(resumable, end, cancelRest)
	r.pending = &cp
	return r.attempt(ctx)
}

// attempt stores r.pending. A write-back of its dead tokens that fails is
// retried here, after its backoff, until the checkpoint is stored without
// the tokens whose write-back keeps failing (see writeback.go): within a
// fraction of the lease, and without the caller's own retry pauses.
func (r *chunkRun) attempt(ctx context.Context) (lease.Result, error) {
	for {
		res, err := r.attemptOnce(ctx)
		var wbe *repository.WriteBackError
		if !errors.As(err, &wbe) {
			return res, err
		}
		if err := r.wb.wait(ctx); err != nil {
			return lease.Result{}, fmt.Errorf("waiting to retry a write-back: %w", err)
		}
	}
}

// attemptOnce stores r.pending once.
func (r *chunkRun) attemptOnce(ctx context.Context) (lease.Result, error) {
	dbctx, cancel := context.WithTimeout(ctx, r.s.in.DBTimeout)
	defer cancel()
	cp := r.pending
	began := time.Now()
	res, err := r.s.leases.Checkpoint(dbctx, r.c, *cp)
	r.s.opt.Metrics.CheckpointTook(time.Since(began))
	switch {
	case err == nil:
		r.pending = nil
		r.gate.confirmed(r.pendingMark)
		if res.Replayed {
			r.log.InfoContext(ctx, "a checkpoint whose commit answer was lost had been stored; not adding it again")
		}
		if res.Late {
			r.log.WarnContext(ctx, "a cancel closed this chunk while its lease was expired (this instance stalled); its sends since the last checkpoint were stored all the same, moved out of canceled",
				"succeeded", cp.Succeeded, "failed", cp.Failed, "capped", cp.Capped)
		}
		r.s.opt.Metrics.Committed(r.b.App, cp.Succeeded, cp.Canceled+res.Rest, cp.Errors, res.Invalidated)
		r.s.opt.Metrics.Capped(r.b.App, cp.Capped, r.settled.Released, r.settled.Over)
		if r.settled.Over > 0 {
			r.log.ErrorContext(ctx, "users sent past the frequency cap: a device was sent without its slot, and another broadcast had taken the slot meanwhile (pushfan_frequency_cap_exceeded_total)",
				"users", r.settled.Over, "retaken", r.settled.Retaken)
		}
		r.settled = caps.Settled{}
		r.s.opt.Metrics.WriteBackSkipped(cp.WriteBackFailures)
		r.logSkipped(ctx, r.wb.stored(true))
	case errors.Is(err, lease.ErrLost):
		r.pending = nil
		r.wb.stored(false)
		if res.Fenced {
			// Not stored as outcomes: the new holder sends these targets
			// again and counts them, unless a cancel ends the chunk first.
			r.fenced = true
			r.log.WarnContext(ctx, "another instance took this chunk over while this one stalled; its sends since the last checkpoint were stored aside for a cancel to count",
				"succeeded", cp.Succeeded, "failed", cp.Failed)
		}
	default:
		r.s.opt.Metrics.CheckpointFailed()
		skips, isWriteBack := r.wb.attemptFailed(err, time.Now())
		if isWriteBack {
			cp.WriteBackFailures = skips
			r.log.WarnContext(ctx, "writing dead tokens back failed; retrying the checkpoint", "err", err,
				"in", time.Until(r.wb.due).Round(time.Millisecond), "left_out", skips)
		}
	}
	return res, err
}

// prepare folds the engine's new outcomes into a checkpoint.
func (r *chunkRun) prepare(resumable bool, end lease.End, cancelRest bool) lease.Checkpoint {
	c := r.p.Commit(resumable)
	stale := r.stale.take()
	cp := lease.Checkpoint{
		Cursor:    max(c.Cursor, r.c.Cursor),
		Done:      toLease(c.Done),
		Succeeded: c.Succeeded, Failed: c.Failed, Canceled: c.Canceled, Capped: c.Capped,
		Errors: c.Errors,
		End:    end,
		Lease:  r.s.in.Lease,

		Sends:    splitOf(c),
		Outcomes: func() []lease.TargetOutcome { return withStale(toLeaseOutcomes(c), stale) },
	}
	if end == lease.Done {
		cp.Cursor, cp.Done, cp.CancelRest = r.c.Hi, nil, cancelRest
	}
	if len(c.Failures) > 0 {
		fs, dead := r.failures(c.Failures)
		cp.Effects = func(ctx context.Context, tx *sql.Tx) (int64, error) {
			kept := r.wb.keep(dead)
			r.wb.ran = len(kept) > 0
			n, err := r.app.Store.WriteOutcomes(ctx, tx, fs, kept)
			if err == nil && r.s.opt.Invalidated != nil && len(kept) > 0 {
				err = r.s.opt.Invalidated(ctx, tx, r.b.ID, invalidatedTokens(kept, fs))
			}
			return n, err
		}
	}
	r.settleCaps(&cp, c.SentUsers, c.UnsentUsers)
	return cp
}

// settleCaps adds to cp's effects the settling of its users' frequency-cap
// reservations (caps.Ledger.Settle): in the checkpoint's transaction, so
// a slot is released exactly when the outcomes that free it are stored,
// and never for a replay.
func (r *chunkRun) settleCaps(cp *lease.Checkpoint, sent, unsent []uint64) {
	if r.caps == nil || len(sent) == 0 && len(unsent) == 0 {
		return
	}
	effects := cp.Effects
	cp.Effects = func(ctx context.Context, tx *sql.Tx) (int64, error) {
		var n int64
		if effects != nil {
			var err error
			if n, err = effects(ctx, tx); err != nil {
				return 0, err
			}
		}
		settled, err := r.caps.settle(ctx, tx, sent, unsent)
		if err != nil {
			return 0, err
		}
		r.settled = settled
		return n, nil
	}
}

// invalidatedTokens are the invalidated tokens of a checkpoint, with their users
// and codes, as the tokens.invalidated webhook lists them.
func invalidatedTokens(kept []repository.Invalidation, fs []model.Failure) []webhook.DeadToken {
	users := make(map[uint64]uint64, len(fs))
	for _, f := range fs {
		users[f.TokenID] = f.UserID
	}
	out := make([]webhook.DeadToken, len(kept))
	for i, d := range kept {
		out[i] = webhook.DeadToken{TokenID: d.TokenID, UserID: users[d.TokenID], Code: d.Reason}
	}
	return out
}

// failures turns the engine's failed targets into failure rows and, unless
// it is a dry run (without invalidate_on_dry_run), dead-token invalidations.
func (r *chunkRun) failures(in []fanout.Failure) ([]model.Failure, []repository.Invalidation) {
	invalidate := !r.b.DryRun || r.b.InvalidateOnDryRun
	fs := make([]model.Failure, len(in))
	var dead []repository.Invalidation
	for i, f := range in {
		fs[i] = model.Failure{
			BroadcastID: r.b.ID, TokenID: f.Target.TokenID, UserID: f.Target.UserID,
			Code: f.Code, Message: f.Message, Attempts: f.Attempts,
		}
		if f.Dead && invalidate {
			dead = append(dead, repository.Invalidation{TokenID: f.Target.TokenID, Token: f.Target.Token, Reason: f.Code})
		}
	}
	return fs, dead
}

// finish ends the chunk according to why the run stopped.
func (r *chunkRun) finish(ctx context.Context, runErr error) {
	var fatal *fanout.ErrFatal
	switch {
	case errors.Is(runErr, errLeaseLost):
		// Someone else owns the chunk now: store nothing as its. A holder
		// a takeover fenced off stores the sends it still had in flight
		// aside, like the ones before (lease, fenced.go).
		if r.fenced {
			r.end(ctx, false, lease.Done, true)
		}
		return
	case errors.As(runErr, &fatal):
		if err := r.s.in.RetryDB(ctx, "failing broadcast", func(c context.Context) error {
			_, err := r.s.leases.Stop(c, r.b.ID, fatal.Error())
			if errors.Is(err, lease.ErrFinished) {
				return nil
			}
			return err
		}); err != nil {
			r.log.ErrorContext(ctx, "could not store the fatal error", "err", err)
		}
	case runErr == nil, errors.Is(runErr, errCanceled):
	default:
		// Shutdown, or the audience could not be read (database down):
		// store every outcome there is and hand the rest back.
		r.end(ctx, true, lease.Release, false)
		r.log.InfoContext(ctx, "chunk released", "reason", runErr.Error(), "resume_after", r.c.Cursor, "done_ranges", len(r.c.Done))
		return
	}
	// Completed, canceled or failed: every target gets an outcome; those
	// never read from the audience are canceled, counted from the plan.
	r.end(ctx, false, lease.Done, runErr != nil)
	// Even if this instance could not close the chunk (its lease lost at
	// the end), whoever did may have been the last: finishing is
	// idempotent and a no-op while chunks are open.
	r.s.Finish(ctx, r.b.ID)
}

// handBack returns the chunk to the queue for an instance that can run it;
// past HandBackTimeout of nobody being able to, the broadcast fails.
func (r *chunkRun) handBack(ctx context.Context, why error) {
	r.s.Refuse(r.b.ID)
	var waited time.Duration
	if err := r.s.in.RetryDB(ctx, "handing a chunk back", func(c context.Context) (err error) {
		waited, err = r.s.leases.HandBack(c, r.c, why.Error())
		return err
	}); err != nil {
		if !errors.Is(err, lease.ErrLost) {
			r.log.ErrorContext(ctx, "handing a chunk back failed; its lease will expire", "err", err)
		}
		return
	}
	if waited < r.s.opt.HandBackTimeout {
		r.log.WarnContext(ctx, "this instance cannot run the chunk; handed back for another", "reason", why.Error(), "unrunnable_for", waited.Round(time.Second))
		return
	}
	r.log.ErrorContext(ctx, "failing the broadcast: no instance can run it", "reason", why.Error())
	r.s.Fail(ctx, r.b.ID, fmt.Sprintf("no instance could run this broadcast for %v: %v", r.s.opt.HandBackTimeout, why))
}

// end stores the final checkpoint, retrying through a database blip.
func (r *chunkRun) end(ctx context.Context, resumable bool, how lease.End, cancelRest bool) {
	lost := false
	err := r.s.in.RetryDB(ctx, "final checkpoint", func(c context.Context) error {
		_, err := r.checkpoint(c, resumable, how, cancelRest)
		if errors.Is(err, lease.ErrLost) {
			lost = true
			return nil
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

// toLeaseOutcomes lists a checkpoint's outcomes target by target, in
// cursor order: every stored checkpoint keeps them (lease, outcomes.go),
// and a fenced holder's count exactly. The engine's lists are each in read
// order, which is cursor order but for retries; a merge of the four is
// sorted in the common case, and the lease sorts the rest.
func toLeaseOutcomes(c fanout.Committed) []lease.TargetOutcome {
	out := make([]lease.TargetOutcome, 0, len(c.SucceededIDs)+len(c.Failures)+len(c.CappedIDs)+len(c.CanceledIDs))
	for _, id := range c.SucceededIDs {
		out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeSucceeded})
	}
	ok := len(c.Failures) == 0 && len(c.CappedIDs) == 0 && len(c.CanceledIDs) == 0
	for _, f := range c.Failures {
		out = append(out, lease.TargetOutcome{Cursor: f.Target.Cursor, Kind: lease.OutcomeFailed, Code: f.Code})
	}
	for _, id := range c.CappedIDs {
		out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeCapped})
	}
	for _, id := range c.CanceledIDs {
		out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeCanceled})
	}
	if !ok {
		slices.SortStableFunc(out, func(a, b lease.TargetOutcome) int { return cmp.Compare(a.Cursor, b.Cursor) })
	}
	return out
}

func toEngine(rs []lease.Range) []fanout.Range {
	out := make([]fanout.Range, len(rs))
	for i, r := range rs {
		out[i] = fanout.Range(r)
	}
	return out
}

func toLease(rs []fanout.Range) []lease.Range {
	out := make([]lease.Range, len(rs))
	for i, r := range rs {
		out[i] = lease.Range(r)
	}
	return out
}
