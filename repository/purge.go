package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"pushfan/internal/platform/clock"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Retention batch sizes: small enough that no statement holds locks for
// long next to the checkpoints of running broadcasts.
const (
	purgeBroadcastBatch = 100
	purgeRowBatch       = 1000
)

// PurgeFinished deletes up to purgeBroadcastBatch broadcasts that finished
// before cutoff, with their failures, error counts, any chunk rows and late holders, and
// returns how many it deleted. Their counters move into the stats archive
// in the same transaction as the delete, so /push/stats totals never
// change. model.Failure rows go first, in batches of 1000 with pause between
// them, since one broadcast may have many.
func (s *Store) PurgeFinished(ctx context.Context, cutoff time.Time, pause time.Duration) (int, error) {
	var ids []uint64
	if err := s.db.SelectContext(ctx, &ids, "SELECT id FROM broadcasts WHERE finished_at < ? ORDER BY finished_at LIMIT ?",
		dbTime(cutoff), purgeBroadcastBatch); err != nil {
		return 0, fmt.Errorf("purge: select: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	for _, id := range ids {
		// Events can only be stored while their broadcast exists (they
		// lock it in share mode), so none comes after the delete below.
		for _, table := range []string{"broadcast_failures", "engagement_events"} {
			for {
				res, err := s.db.ExecContext(ctx, "DELETE FROM "+table+" WHERE broadcast_id = ? LIMIT ?", id, purgeRowBatch)
				if err != nil {
					return 0, fmt.Errorf("purge %s of %d: %w", table, id, err)
				}
				if n, _ := res.RowsAffected(); n < purgeRowBatch {
					break
				}
				if err := clock.Sleep(ctx, pause); err != nil {
					return 0, err
				}
			}
		}
	}
	in := sqldb.InList(len(ids))
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	var deleted int
	err := sqldb.InTx(ctx, s.db.DB, s.log, "purge broadcasts", func(tx *sql.Tx) error {
		// Lock the rows first: the sums below then read them as they are
		// deleted (the transaction's snapshot starts at its first plain read).
		lrows, err := tx.QueryContext(ctx, "SELECT id FROM broadcasts WHERE id IN ("+in+") AND finished_at < ? FOR UPDATE", append(args, dbTime(cutoff))...)
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		lrows.Close()
		// The totals go to the archive per app: GET /push/stats?app= keeps
		// counting a broadcast after retention deleted it.
		sums, err := tx.QueryContext(ctx, `SELECT app, COUNT(*), COALESCE(SUM(dry_run = 0), 0), COALESCE(SUM(dry_run <> 0), 0),
				COALESCE(SUM(IF(dry_run = 0, targeted, 0)), 0), COALESCE(SUM(IF(dry_run = 0, succeeded, 0)), 0),
				COALESCE(SUM(IF(dry_run = 0, failed, 0)), 0), COALESCE(SUM(IF(dry_run = 0, canceled, 0)), 0),
				COALESCE(SUM(IF(dry_run = 0, invalidated_tokens, 0)), 0), COALESCE(SUM(IF(dry_run = 0, capped, 0)), 0)
			FROM broadcasts WHERE id IN (`+in+`) AND finished_at < ? GROUP BY app`, append(args, dbTime(cutoff))...)
		if err != nil {
			return fmt.Errorf("sum: %w", err)
		}
		type appSums struct {
			app string
			n   int
			st  model.Stats
		}
		var per []appSums
		for sums.Next() {
			var a appSums
			if err := sums.Scan(&a.app, &a.n, &a.st.Broadcasts, &a.st.DryRuns, &a.st.Targeted, &a.st.Succeeded, &a.st.Failed, &a.st.Canceled, &a.st.InvalidatedTokens, &a.st.Capped); err != nil {
				sums.Close()
				return fmt.Errorf("sum: %w", err)
			}
			per = append(per, a)
		}
		sums.Close()
		if err := sums.Err(); err != nil {
			return fmt.Errorf("sum: %w", err)
		}
		deleted = 0
		for _, a := range per {
			deleted += a.n
			st := a.st
			if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive (id, app, broadcasts, dry_runs, targeted, succeeded, failed, canceled, invalidated_tokens, capped)
			VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE broadcasts = broadcasts + VALUES(broadcasts), dry_runs = dry_runs + VALUES(dry_runs),
			targeted = targeted + VALUES(targeted), succeeded = succeeded + VALUES(succeeded), failed = failed + VALUES(failed),
			canceled = canceled + VALUES(canceled), invalidated_tokens = invalidated_tokens + VALUES(invalidated_tokens), capped = capped + VALUES(capped)`,
				a.app, st.Broadcasts, st.DryRuns, st.Targeted, st.Succeeded, st.Failed, st.Canceled, st.InvalidatedTokens, st.Capped); err != nil {
				return fmt.Errorf("archive totals: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE stats_archive a JOIN (
				SELECT b.app, COALESCE(SUM(IF(c.type = ?, c.n, 0)), 0) AS opened, COALESCE(SUM(IF(c.type = ?, c.n, 0)), 0) AS clicked
				FROM engagement_counts c JOIN broadcasts b ON b.id = c.broadcast_id
				WHERE b.id IN (`+in+`) AND b.finished_at < ? GROUP BY b.app
			) e ON e.app = a.app SET a.opened = a.opened + e.opened, a.clicked = a.clicked + e.clicked`,
			append([]any{uint8(model.EventOpened), uint8(model.EventClicked)}, append(args, dbTime(cutoff))...)...); err != nil {
			return fmt.Errorf("archive engagement: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive_errors (app, code, count)
			SELECT b.app, e.code, SUM(e.count) FROM broadcast_errors e JOIN broadcasts b ON b.id = e.broadcast_id
			WHERE b.id IN (`+in+`) AND b.finished_at < ? AND b.dry_run = 0 GROUP BY b.app, e.code
			ON DUPLICATE KEY UPDATE count = stats_archive_errors.count + VALUES(count)`, append(args, dbTime(cutoff))...); err != nil {
			return fmt.Errorf("archive error counts: %w", err)
		}
		for _, q := range []string{
			"DELETE FROM broadcast_errors WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM broadcast_variants WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM broadcast_chunks WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			// A late holder that never reported (it died) is forgotten
			// with its broadcast; its targets stay counted canceled.
			"DELETE FROM late_holders WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			// Dropped by Finish, unless an instance of an older version finished the broadcast.
			"DELETE FROM fenced_sends WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM engagement_events WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM engagement_counts WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM engagement_series WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM engagement_open_delays WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM send_rate WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			// Webhooks delivered (or given up) go with their broadcast; one
			// still waiting stays until it is delivered or expires.
			"DELETE FROM webhook_outbox WHERE status <> 'pending' AND broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?",
		} {
			if _, err := tx.ExecContext(ctx, q, append(args, dbTime(cutoff))...); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
