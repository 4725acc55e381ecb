// Package retention deletes what pushfan no longer keeps: broadcasts that
// finished longer ago than PUSHFAN_RETENTION, with their failure rows and
// error counts, old skipped cron fires, and audit entries older than
// PUSHFAN_AUDIT_RETENTION. Their totals move into the
// stats archive in the same transaction as each delete, so /push/stats
// does not change.
//
// Every instance runs a Runner; a MySQL named lock makes one pass run on
// one instance at a time. A pass works in small batches with a pause
// between them, so the deletes never hold locks that running broadcasts'
// checkpoints wait on for long.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"pushfan/internal/platform/clock"
	"pushfan/internal/platform/lifecycle"
)

// Store is what a pass needs from storage.
type Store interface {
	TryLock(ctx context.Context, name string) (release func(), ok bool, err error)
	PurgeFinished(ctx context.Context, cutoff time.Time, pause time.Duration) (int, error)
	PurgeSkippedFires(ctx context.Context, cutoff time.Time) (int64, error)
}

// Ledger is the frequency caps' (package caps): Sweep deletes slots
// expired before expiredBefore and the answers of broadcasts finished
// before finishedBefore, in small batches.
type Ledger interface {
	Sweep(ctx context.Context, expiredBefore, finishedBefore time.Time) (int64, error)
}

// Outcomes holds every target's kept outcome (package lease, outcomes.go):
// PurgeOutcomes deletes those of up to a batch of broadcasts finished
// before cutoff, and says how many it cleared.
type Outcomes interface {
	PurgeOutcomes(ctx context.Context, cutoff time.Time, pause time.Duration) (int, error)
}

// ledgerGrace is how long past its expiry a slot, or past its broadcast's
// end an answer, is kept: instances' clocks differ a little, and a chunk
// run that lost its lease may still be reading its last page.
const ledgerGrace = time.Hour

// Trail is the audit trail's storage: PurgeAudit deletes entries older
// than cutoff in small batches with pause between them, and returns how
// many it deleted.
type Trail interface {
	PurgeAudit(ctx context.Context, cutoff time.Time, pause time.Duration) (int64, error)
}

// Options tune a Runner.
type Options struct {
	// Ledger, if set, is swept at every pass.
	Ledger Ledger
	// Trail, if set, loses its entries older than AuditKeep at every pass.
	Trail     Trail
	AuditKeep time.Duration
	Keep      time.Duration // how long finished broadcasts are kept
	// Outcomes, if set, has the kept per-target outcomes of broadcasts
	// finished longer than OutcomeKeep ago deleted at every pass
	// (PUSHFAN_OUTCOME_RETENTION), before their broadcast goes.
	Outcomes    Outcomes
	OutcomeKeep time.Duration
	Every       time.Duration // time between passes (jittered by up to a tenth)
	Pause       time.Duration // between batches of one pass
	Now         func() time.Time
}

// Runner runs retention passes until stopped.
type Runner struct {
	store Store
	log   *slog.Logger
	opt   Options

	loop lifecycle.Loop
}

// New returns a Runner; Start begins its passes.
func New(store Store, log *slog.Logger, opt Options) *Runner {
	if opt.Every <= 0 {
		opt.Every = 15 * time.Minute
	}
	if opt.Pause <= 0 {
		opt.Pause = 50 * time.Millisecond
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Runner{store: store, log: log, opt: opt}
}

// Start runs a pass soon and then every Options.Every, until Stop or ctx
// ends. Starting twice does nothing.
func (r *Runner) Start(ctx context.Context) { r.loop.Start(ctx, r.run) }

// Stop ends the Runner, aborting a pass in progress, and waits for it (up
// to ctx). Safe twice, and before Start.
func (r *Runner) Stop(ctx context.Context) error { return r.loop.Stop(ctx) }

func (r *Runner) run(ctx context.Context) {
	// The first pass a little after start-up, spread across instances.
	wait := time.Duration(rand.Int64N(int64(time.Minute)))
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("retention pass failed; the next one retries", "err", err)
		}
		wait = r.opt.Every + time.Duration(rand.Int64N(int64(r.opt.Every/10)+1))
	}
}

// Result is what one pass deleted.
type Result struct {
	Ran          bool // false when another instance holds the lock
	Broadcasts   int
	SkippedFires int64
	// CapRows are the frequency ledger's rows deleted.
	CapRows int64
	// AuditEntries are the audit entries deleted.
	AuditEntries int64
	// OutcomeBroadcasts are the broadcasts whose kept outcomes were deleted.
	OutcomeBroadcasts int
}

// RunOnce runs one pass now, unless another instance is running one.
func (r *Runner) RunOnce(ctx context.Context) (Result, error) {
	release, ok, err := r.store.TryLock(ctx, "pushfan_retention")
	if err != nil || !ok {
		return Result{}, err
	}
	defer release()
	res := Result{Ran: true}
	cutoff := r.opt.Now().Add(-r.opt.Keep)
	if r.opt.Ledger != nil {
		// Before the broadcasts go: an answer is found by its broadcast's
		// end.
		before := r.opt.Now().Add(-ledgerGrace)
		if res.CapRows, err = r.opt.Ledger.Sweep(ctx, before, before); err != nil {
			return res, fmt.Errorf("sweeping the frequency ledger: %w", err)
		}
	}
	if r.opt.Trail != nil && r.opt.AuditKeep > 0 {
		if res.AuditEntries, err = r.opt.Trail.PurgeAudit(ctx, r.opt.Now().Add(-r.opt.AuditKeep), r.opt.Pause); err != nil {
			return res, fmt.Errorf("deleting old audit entries: %w", err)
		}
	}
	if err := r.purgeOutcomes(ctx, &res); err != nil {
		return res, err
	}
	for {
		n, err := r.store.PurgeFinished(ctx, cutoff, r.opt.Pause)
		res.Broadcasts += n
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
		if err := clock.Sleep(ctx, r.opt.Pause); err != nil {
			return res, err
		}
	}
	for {
		n, err := r.store.PurgeSkippedFires(ctx, cutoff)
		res.SkippedFires += n
		if err != nil || n == 0 {
			if res.Broadcasts > 0 || res.SkippedFires > 0 || res.AuditEntries > 0 {
				r.log.Info("retention pass", "broadcasts_deleted", res.Broadcasts, "skipped_fires_deleted", res.SkippedFires, "older_than", cutoff,
					"frequency_ledger_rows_deleted", res.CapRows, "audit_entries_deleted", res.AuditEntries)
			}
			return res, err
		}
		if err := clock.Sleep(ctx, r.opt.Pause); err != nil {
			return res, err
		}
	}
}

// purgeOutcomes deletes the kept outcomes past OutcomeKeep, a batch of
// broadcasts at a time with a pause between.
func (r *Runner) purgeOutcomes(ctx context.Context, res *Result) error {
	if r.opt.Outcomes == nil || r.opt.OutcomeKeep <= 0 {
		return nil
	}
	cutoff := r.opt.Now().Add(-r.opt.OutcomeKeep)
	for {
		n, err := r.opt.Outcomes.PurgeOutcomes(ctx, cutoff, r.opt.Pause)
		res.OutcomeBroadcasts += n
		if err != nil {
			return fmt.Errorf("deleting kept outcomes: %w", err)
		}
		if n == 0 {
			if res.OutcomeBroadcasts > 0 {
				r.log.Info("retention pass: kept outcomes deleted", "broadcasts", res.OutcomeBroadcasts, "finished_before", cutoff)
			}
			return nil
		}
		if err := clock.Sleep(ctx, r.opt.Pause); err != nil {
			return err
		}
	}
}
