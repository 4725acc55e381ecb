package webhook

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// stageHold is how long a pass holds its stage without a word. Every step
// renews it, so the stage passes to another instance only after the
// holding instance died or stalled.
const stageHold = 2 * time.Minute

// errHoldLost: the stage's hold ran out and another instance's pass took
// it before this one moved the cursor; that one goes on from the cursor.
var errHoldLost = errors.New("another instance took the stage over before this pass moved its cursor")

// pass settles stage after's due summaries, unless another instance's
// pass holds the stage: first the retries that are due, then the
// broadcasts past the stage's cursor, summaryBatch at a time. Each one's
// summary is written (or found written), found to have nothing to send,
// or put in the retries; either way the cursor moves past it. So a
// broadcast is looked at once per stage, not at every pass while it is in
// the window, and a failing summary keeps no later one waiting.
func (s *Summaries) pass(ctx context.Context, after time.Duration) (int, error) {
	stage := int64(after / time.Second)
	if _, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO webhook_summary_cursors (stage, finished_at, broadcast_id) VALUES (?, '1970-01-01', 0)", stage); err != nil {
		return 0, fmt.Errorf("the stage's cursor: %w", err)
	}
	holder := rand.Int64()
	res, err := s.db.ExecContext(ctx, `UPDATE webhook_summary_cursors SET holder = ?, held_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
		WHERE stage = ? AND held_until <= UTC_TIMESTAMP(6)`, holder, stageHold.Microseconds(), stage)
	if err != nil {
		return 0, fmt.Errorf("holding the stage: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err // another instance's pass holds it
	}
	defer func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		if _, err := s.db.ExecContext(bg, "UPDATE webhook_summary_cursors SET held_until = '1970-01-01' WHERE stage = ? AND holder = ?", stage, holder); err != nil {
			s.log.Warn("webhooks: letting go of an engagement summaries stage failed; another instance takes it when the hold runs out", "stage", StageName(after), "err", err)
		}
	}()
	var cur Finished
	if err := s.db.QueryRowContext(ctx, "SELECT finished_at, broadcast_id FROM webhook_summary_cursors WHERE stage = ?", stage).Scan(&cur.At, &cur.ID); err != nil {
		return 0, fmt.Errorf("the stage's cursor: %w", err)
	}
	now := s.now()
	added, err := s.retry(ctx, after, now)
	if err != nil {
		return added, err
	}
	// Broadcasts that finished before from are more than SummaryGrace
	// overdue at this stage (the deployment was down): skipped.
	if from := now.Add(-after - SummaryGrace); cur.At.Before(from) {
		cur = Finished{At: from}
	}
	for {
		list, err := s.src.FinishedAfter(ctx, cur, now.Add(-after), summaryBatch)
		if err != nil || len(list) == 0 {
			return added, err
		}
		n, err := s.settle(ctx, after, now, list)
		added += n
		if err != nil {
			return added, err // the cursor stays: the next pass does these again, writing what is missing
		}
		cur = list[len(list)-1]
		res, err := s.db.ExecContext(ctx, `UPDATE webhook_summary_cursors SET finished_at = ?, broadcast_id = ?, held_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
			WHERE stage = ? AND holder = ?`, cur.At, cur.ID, stageHold.Microseconds(), stage, holder)
		if err != nil {
			return added, fmt.Errorf("moving the stage's cursor: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return added, errors.Join(err, errHoldLost)
		}
		if len(list) < summaryBatch {
			return added, nil
		}
	}
}

// settle writes the summaries of list (a step of a pass at stage after)
// not written yet. One that fails goes to the retries, and the step goes
// on with the next.
func (s *Summaries) settle(ctx context.Context, after time.Duration, now time.Time, list []Finished) (int, error) {
	ids := make([]uint64, len(list))
	for i, f := range list {
		ids[i] = f.ID
	}
	missing, err := s.missing(ctx, ids, after)
	if err != nil {
		return 0, err
	}
	added := 0
	for _, f := range list {
		if len(missing[f.ID]) == 0 {
			continue
		}
		n, err := s.write(ctx, f.ID, after, missing[f.ID])
		added += n
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return added, ctx.Err() // stopping, not a failure of this summary
		}
		if err := s.failed(ctx, f, after, now, 0, err); err != nil {
			return added, err
		}
	}
	return added, nil
}
