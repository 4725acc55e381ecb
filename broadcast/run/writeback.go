package run

import (
	"context"
	"errors"
	"time"

	"pushfan/internal/platform/logging"
	"pushfan/repository"
)

// A mapped schema writes dead tokens back with the operator's on_dead
// statement, inside the checkpoint's transaction. When it fails (a trigger
// refuses the row, a grant or a column is gone), the checkpoint that
// carries it is rolled back and retried after a backoff; a token whose
// write-back keeps failing is then left out, so that the checkpoint
// commits, renews the lease and stores every outcome, and is counted
// (writeback_failures, pushfan_writeback_failures_total) and logged. Its
// failure row is stored: only the app's table is not told. Without this,
// a statement that always fails makes a checkpoint that can never commit:
// the lease lapses and every takeover re-sends the same window.
const (
	// writeBackAttempts is how many attempts of a checkpoint one dead
	// token's write-back may fail before it is left out.
	writeBackAttempts = 4
	// writeBackBackoff is the wait before a checkpoint whose write-back
	// failed is tried again; it doubles at each failed attempt.
	writeBackBackoff = 100 * time.Millisecond
)

// The retries of one checkpoint stay well within the lease, which is not
// renewed meanwhile: a token is left out at the latest a quarter of the
// lease after the checkpoint's first failure, and no wait is longer than
// an eighth of it.
const (
	writeBackWithin  = 4 // the budget is Lease / writeBackWithin
	writeBackMaxWait = 8 // each wait is at most Lease / writeBackMaxWait
)

// writeBacks is a chunk run's record of failing write-backs: those of its
// pending checkpoint, and whether the run's write-back is broken (the last
// checkpoint with dead tokens left some out), in which case a token that
// fails is given one more attempt only, so that a statement that always
// fails costs each later checkpoint two failed attempts and one short
// wait, not the whole backoff.
//
// Leaving tokens out changes the pending checkpoint, which the lease
// protocol allows only where no attempt of it can have committed: the set
// grows only right after an attempt failed with a *WriteBackError, and
// that error is raised after the checkpoint's sequence number was checked
// against the row (a replay runs no write-back), so no earlier attempt had
// committed either. A replay therefore always repeats what was stored.
type writeBacks struct {
	lease  time.Duration
	broken bool

	// Of the pending checkpoint, by token.
	failed  map[string]*deadFailure
	since   time.Time // its first failed attempt
	retries int       // its failed attempts
	due     time.Time // its next attempt
	ran     bool      // its last attempt ran on_dead for some token
}

// deadFailure is one dead token whose write-back failed.
type deadFailure struct {
	inv      repository.Invalidation
	attempts int
	err      error
	skip     bool // left out of the checkpoint
}

// keep is dead without the tokens left out.
func (w *writeBacks) keep(dead []repository.Invalidation) []repository.Invalidation {
	if len(w.failed) == 0 {
		return dead
	}
	out := make([]repository.Invalidation, 0, len(dead))
	for _, d := range dead {
		if f := w.failed[d.Token]; f == nil || !f.skip {
			out = append(out, d)
		}
	}
	return out
}

// wait holds the next attempt until its backoff has passed.
func (w *writeBacks) wait(ctx context.Context) error {
	d := time.Until(w.due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// attemptFailed records an attempt that failed with err and returns the
// skip count the pending checkpoint carries from now on, and whether err
// was a write-back's.
func (w *writeBacks) attemptFailed(err error, now time.Time) (skips int64, isWriteBack bool) {
	var wbe *repository.WriteBackError
	if !errors.As(err, &wbe) {
		return w.skips(), false
	}
	if w.failed == nil {
		w.failed, w.since = map[string]*deadFailure{}, now
	}
	w.retries++
	limit := writeBackAttempts
	if w.broken {
		limit = 2
	}
	outOfTime := now.Sub(w.since) >= w.lease/writeBackWithin
	grew := false
	for _, f := range wbe.Failed {
		df := w.failed[f.Token]
		if df == nil {
			df = &deadFailure{inv: f.Invalidation}
			w.failed[f.Token] = df
		}
		df.attempts++
		df.err = f.Err
		if !df.skip && (df.attempts >= limit || outOfTime) {
			df.skip, grew = true, true
		}
	}
	if grew {
		w.due = now // the checkpoint without them may commit at once
	} else {
		w.due = now.Add(min(writeBackBackoff<<(w.retries-1), w.lease/writeBackMaxWait))
	}
	return w.skips(), true
}

// skips counts the pending checkpoint's tokens left out.
func (w *writeBacks) skips() int64 {
	var n int64
	for _, f := range w.failed {
		if f.skip {
			n++
		}
	}
	return n
}

// stored ends the pending checkpoint's record once it committed (or is
// lost: committed false), and returns the tokens it left out.
func (w *writeBacks) stored(committed bool) []*deadFailure {
	var skipped []*deadFailure
	for _, f := range w.failed {
		if f.skip {
			skipped = append(skipped, f)
		}
	}
	if committed {
		switch {
		case len(skipped) > 0:
			w.broken = true
		case w.ran:
			w.broken = false // on_dead works again
		}
	}
	w.failed, w.retries, w.due, w.ran = nil, 0, time.Time{}, false
	return skipped
}

// logSkipped logs each token a stored checkpoint left out: its id and a
// prefix, never the whole token, and on_dead's last error.
func (r *chunkRun) logSkipped(ctx context.Context, skipped []*deadFailure) {
	for _, f := range skipped {
		r.log.ErrorContext(ctx, "dead token not written back to the app's table: schema.tokens.on_dead kept failing; its failure is stored and counted in writeback_failures",
			"token_id", f.inv.TokenID, "token", logging.TokenPrefix(f.inv.Token), "code", f.inv.Reason,
			"attempts", f.attempts, "err", logging.RedactToken(f.err.Error(), f.inv.Token))
	}
}
