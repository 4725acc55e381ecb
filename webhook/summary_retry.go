package webhook

import (
	"context"
	"fmt"
	"time"
)

// summaryRetryWait is the wait after a summary's nth failure (from 1):
// 1, 5, 15, then every 30 minutes, until the stage is SummaryGrace
// overdue.
func summaryRetryWait(n int) time.Duration {
	switch {
	case n <= 1:
		return time.Minute
	case n == 2:
		return 5 * time.Minute
	case n == 3:
		return 15 * time.Minute
	default:
		return 30 * time.Minute
	}
}

// failed puts broadcast f's summary at stage after, which has failed
// attempts times before and now failed with cause, in the retries: logged,
// told to OnFailed, and due again after summaryRetryWait.
func (s *Summaries) failed(ctx context.Context, f Finished, after time.Duration, now time.Time, attempts int, cause error) error {
	n := attempts + 1
	wait := summaryRetryWait(n)
	why := cause.Error()
	if len(why) > maxErrorLen {
		why = why[:maxErrorLen]
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO webhook_summary_retries (broadcast_id, stage, finished_at, attempts, next_at, last_error) VALUES (?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), next_at = VALUES(next_at), last_error = VALUES(last_error)`,
		f.ID, int64(after/time.Second), f.At, n, now.Add(wait), why); err != nil {
		return fmt.Errorf("keeping the failed summary of %d for a retry: %w", f.ID, err)
	}
	s.log.Warn("webhooks: an engagement summary failed; it is tried again later", "broadcast_id", f.ID, "stage", StageName(after),
		"attempts", n, "retry_in", wait, "err", cause)
	if s.OnFailed != nil {
		s.OnFailed(StageName(after))
	}
	return nil
}

// retry tries again the failed summaries of stage after that are due at
// now; one more than SummaryGrace overdue is dropped, as a pass skips it.
func (s *Summaries) retry(ctx context.Context, after time.Duration, now time.Time) (int, error) {
	type due struct {
		f        Finished
		attempts int
	}
	var list []due
	rows, err := s.db.QueryContext(ctx, "SELECT broadcast_id, finished_at, attempts FROM webhook_summary_retries WHERE stage = ? AND next_at <= ? ORDER BY next_at LIMIT ?",
		int64(after/time.Second), now, summaryBatch)
	if err != nil {
		return 0, fmt.Errorf("the summaries to retry: %w", err)
	}
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.f.ID, &d.f.At, &d.attempts); err != nil {
			rows.Close()
			return 0, fmt.Errorf("the summaries to retry: %w", err)
		}
		list = append(list, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("the summaries to retry: %w", err)
	}
	added := 0
	for _, d := range list {
		if now.Sub(d.f.At) > after+SummaryGrace {
			s.log.Warn("webhooks: a failed engagement summary is more than the grace overdue; it is not sent", "broadcast_id", d.f.ID, "stage", StageName(after), "attempts", d.attempts)
		} else {
			missing, err := s.missing(ctx, []uint64{d.f.ID}, after)
			if err != nil {
				return added, err
			}
			if len(missing[d.f.ID]) > 0 {
				n, err := s.write(ctx, d.f.ID, after, missing[d.f.ID])
				added += n
				if err != nil {
					if ctx.Err() != nil {
						return added, ctx.Err()
					}
					if err := s.failed(ctx, d.f, after, now, d.attempts, err); err != nil {
						return added, err
					}
					continue
				}
			}
		}
		if _, err := s.db.ExecContext(ctx, "DELETE FROM webhook_summary_retries WHERE broadcast_id = ? AND stage = ?", d.f.ID, int64(after/time.Second)); err != nil {
			return added, fmt.Errorf("a retried summary: %w", err)
		}
	}
	return added, nil
}
