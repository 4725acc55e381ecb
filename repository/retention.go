package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"pushfan/internal/clock"
	"pushfan/internal/sqldb"
)

// Retention batch sizes: small enough that no statement holds locks for
// long next to the checkpoints of running broadcasts.
const (
	purgeBroadcastBatch = 100
	purgeRowBatch       = 1000
)

// PurgeFinished deletes up to purgeBroadcastBatch broadcasts that finished
// before cutoff, with their failures, error counts and any chunk rows, and
// returns how many it deleted. Their counters move into the stats archive
// in the same transaction as the delete, so /push/stats totals never
// change. Failure rows go first, in batches of 1000 with pause between
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
		for {
			res, err := s.db.ExecContext(ctx, "DELETE FROM broadcast_failures WHERE broadcast_id = ? LIMIT ?", id, purgeRowBatch)
			if err != nil {
				return 0, fmt.Errorf("purge failures of %d: %w", id, err)
			}
			if n, _ := res.RowsAffected(); n < purgeRowBatch {
				break
			}
			if err := clock.Sleep(ctx, pause); err != nil {
				return 0, err
			}
		}
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
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
		var st Stats
		err = tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(dry_run = 0), 0), COALESCE(SUM(dry_run <> 0), 0),
				COALESCE(SUM(IF(dry_run = 0, targeted, 0)), 0), COALESCE(SUM(IF(dry_run = 0, succeeded, 0)), 0),
				COALESCE(SUM(IF(dry_run = 0, failed, 0)), 0), COALESCE(SUM(IF(dry_run = 0, canceled, 0)), 0),
				COALESCE(SUM(IF(dry_run = 0, invalidated_tokens, 0)), 0)
			FROM broadcasts WHERE id IN (`+in+`) AND finished_at < ?`, append(args, dbTime(cutoff))...).
			Scan(&deleted, &st.Broadcasts, &st.DryRuns, &st.Targeted, &st.Succeeded, &st.Failed, &st.Canceled, &st.InvalidatedTokens)
		if err != nil {
			return fmt.Errorf("sum: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive (id, broadcasts, dry_runs, targeted, succeeded, failed, canceled, invalidated_tokens)
			VALUES (1, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE broadcasts = broadcasts + VALUES(broadcasts), dry_runs = dry_runs + VALUES(dry_runs),
			targeted = targeted + VALUES(targeted), succeeded = succeeded + VALUES(succeeded), failed = failed + VALUES(failed),
			canceled = canceled + VALUES(canceled), invalidated_tokens = invalidated_tokens + VALUES(invalidated_tokens)`,
			st.Broadcasts, st.DryRuns, st.Targeted, st.Succeeded, st.Failed, st.Canceled, st.InvalidatedTokens); err != nil {
			return fmt.Errorf("archive totals: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive_errors (code, count)
			SELECT e.code, SUM(e.count) FROM broadcast_errors e JOIN broadcasts b ON b.id = e.broadcast_id
			WHERE b.id IN (`+in+`) AND b.finished_at < ? AND b.dry_run = 0 GROUP BY e.code
			ON DUPLICATE KEY UPDATE count = stats_archive_errors.count + VALUES(count)`, append(args, dbTime(cutoff))...); err != nil {
			return fmt.Errorf("archive error counts: %w", err)
		}
		for _, q := range []string{
			"DELETE FROM broadcast_errors WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
			"DELETE FROM broadcast_chunks WHERE broadcast_id IN (SELECT id FROM broadcasts WHERE id IN (" + in + ") AND finished_at < ?)",
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

// PurgeSkippedFires deletes up to 1000 skipped cron fires older than
// cutoff and returns how many.
func (s *Store) PurgeSkippedFires(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, "DELETE FROM cron_skipped_fires WHERE fire_time < ? LIMIT ?", dbTime(cutoff), purgeRowBatch)
	if err != nil {
		return 0, fmt.Errorf("purge skipped fires: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// TryLock takes the MySQL named lock name (scoped to this database) on a
// connection of its own, without waiting, and returns a release function;
// ok is false when another session holds it. The lock is the server's, so
// it serialises every instance, and it goes away if the connection dies.
func (s *Store) TryLock(ctx context.Context, name string) (release func(), ok bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), 0)", name).Scan(&got); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, false, nil
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))", name)
		conn.Close()
	}, true, nil
}
