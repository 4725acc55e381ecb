package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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
// before cutoff, with their failures, error counts, engagement, send
// rates, delivered webhooks, any chunk rows and late holders, and returns
// how many it deleted. Their counters move into the stats archive in the
// same transaction as the delete, so /push/stats totals never change.
//
// Running broadcasts write rows into the same tables all the time (their
// checkpoints, events and webhooks), so no statement here reads or locks
// one of their rows, nor a gap beside them: the due ids are read first,
// and every row is found through its broadcast's key prefix and deleted
// by its whole primary key (purgeRows). Deleting "WHERE broadcast_id IN
// (SELECT id FROM broadcasts …)" instead ran as a dependent subquery on
// MariaDB up to 11.0, a scan of the whole table that locked every row
// until the commit: checkpoints timed out waiting for it (1205). The
// tables with many rows per broadcast go first, a batch per statement
// with a pause after each, outside the transaction that deletes the
// broadcasts; that one deletes what is left (rows written since).
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
		for _, t := range bigPurged {
			if _, err := purgeRows(ctx, s.db, t, []uint64{id}, pause); err != nil {
				return 0, fmt.Errorf("purge broadcast %d: %w", id, err)
			}
		}
	}
	var deleted int
	err := sqldb.InTx(ctx, s.db.DB, s.log, "purge broadcasts", func(tx *sql.Tx) error {
		var err error
		deleted, err = purgeLocked(ctx, tx, ids, cutoff)
		return err
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// purgeLocked locks those of ids that finished before cutoff, moves their
// totals to the archive, and deletes them with what is left of their
// rows. It returns how many it deleted.
func purgeLocked(ctx context.Context, tx *sql.Tx, ids []uint64, cutoff time.Time) (int, error) {
	// Lock the rows first, a look-up of each (lockKeys: those rows only;
	// "WHERE id IN (…) FOR UPDATE" reads, and locks, the row after each
	// id too, which may be a running broadcast's): the reads
	// below then see them as they are deleted (the transaction's snapshot
	// starts at its first plain read), and nothing stored with a
	// broadcast locked (events, checkpoints) is written for them any
	// more, so the plain reads of their rows below see every one.
	keys := make([][]any, len(ids))
	for i, id := range ids {
		keys[i] = []any{id}
	}
	lock, largs, err := lockKeys(broadcastsTable, keys, "t.finished_at < ?")
	if err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	var locked []uint64
	lrows, err := tx.QueryContext(ctx, lock, append(largs, dbTime(cutoff))...)
	if err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	for lrows.Next() {
		var id uint64
		if err := lrows.Scan(&id); err != nil {
			lrows.Close()
			return 0, fmt.Errorf("lock: %w", err)
		}
		locked = append(locked, id)
	}
	lrows.Close()
	if err := lrows.Err(); err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	if len(locked) == 0 {
		return 0, nil
	}
	deleted, err := archive(ctx, tx, locked)
	if err != nil {
		return 0, err
	}
	for _, t := range append(append([]purgedTable(nil), bigPurged...), smallPurged...) {
		if _, err := purgeRows(ctx, tx, t, locked, 0); err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
	}
	// By whole key too: a DELETE … WHERE id IN (…) may scan a small
	// broadcasts table, or read past each id, locking running
	// broadcasts' rows.
	keys = make([][]any, len(locked))
	for i, id := range locked {
		keys[i] = []any{id}
	}
	del, dargs, err := deleteKeys(broadcastsTable, keys)
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if _, err := tx.ExecContext(ctx, del, dargs...); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	return deleted, nil
}

// archive adds the totals of the locked broadcasts ids to the stats
// archive, per app (GET /push/stats?app= keeps counting a broadcast
// after retention deleted it), and returns how many broadcasts they are.
// It reads with plain reads and writes literal values: an INSERT … SELECT
// or UPDATE … JOIN would take shared next-key locks on the broadcasts'
// error and engagement counts, and on the gap after them that a running
// broadcast inserts into.
func archive(ctx context.Context, tx *sql.Tx, ids []uint64) (int, error) {
	in := sqldb.InList(len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	sums, err := tx.QueryContext(ctx, `SELECT app, COUNT(*), COALESCE(SUM(dry_run = 0), 0), COALESCE(SUM(dry_run <> 0), 0),
			COALESCE(SUM(IF(dry_run = 0, targeted, 0)), 0), COALESCE(SUM(IF(dry_run = 0, succeeded, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, failed, 0)), 0), COALESCE(SUM(IF(dry_run = 0, canceled, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, invalidated_tokens, 0)), 0), COALESCE(SUM(IF(dry_run = 0, capped, 0)), 0)
		FROM broadcasts WHERE id IN (`+in+`) GROUP BY app`, args...)
	if err != nil {
		return 0, fmt.Errorf("sum: %w", err)
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
			return 0, fmt.Errorf("sum: %w", err)
		}
		per = append(per, a)
	}
	sums.Close()
	if err := sums.Err(); err != nil {
		return 0, fmt.Errorf("sum: %w", err)
	}
	deleted := 0
	for _, a := range per {
		deleted += a.n
		st := a.st
		if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive (id, app, broadcasts, dry_runs, targeted, succeeded, failed, canceled, invalidated_tokens, capped)
		VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE broadcasts = broadcasts + VALUES(broadcasts), dry_runs = dry_runs + VALUES(dry_runs),
		targeted = targeted + VALUES(targeted), succeeded = succeeded + VALUES(succeeded), failed = failed + VALUES(failed),
		canceled = canceled + VALUES(canceled), invalidated_tokens = invalidated_tokens + VALUES(invalidated_tokens), capped = capped + VALUES(capped)`,
			a.app, st.Broadcasts, st.DryRuns, st.Targeted, st.Succeeded, st.Failed, st.Canceled, st.InvalidatedTokens, st.Capped); err != nil {
			return 0, fmt.Errorf("archive totals: %w", err)
		}
	}
	eng, err := tx.QueryContext(ctx, `SELECT b.app, COALESCE(SUM(IF(c.type = ?, c.n, 0)), 0), COALESCE(SUM(IF(c.type = ?, c.n, 0)), 0)
		FROM engagement_counts c JOIN broadcasts b ON b.id = c.broadcast_id
		WHERE c.broadcast_id IN (`+in+`) GROUP BY b.app`, append([]any{uint8(model.EventOpened), uint8(model.EventClicked)}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("archive engagement: %w", err)
	}
	type appEngagement struct {
		app             string
		opened, clicked uint64
	}
	var engs []appEngagement
	for eng.Next() {
		var e appEngagement
		if err := eng.Scan(&e.app, &e.opened, &e.clicked); err != nil {
			eng.Close()
			return 0, fmt.Errorf("archive engagement: %w", err)
		}
		engs = append(engs, e)
	}
	eng.Close()
	if err := eng.Err(); err != nil {
		return 0, fmt.Errorf("archive engagement: %w", err)
	}
	for _, e := range engs {
		if _, err := tx.ExecContext(ctx, "UPDATE stats_archive SET opened = opened + ?, clicked = clicked + ? WHERE app = ?", e.opened, e.clicked, e.app); err != nil {
			return 0, fmt.Errorf("archive engagement: %w", err)
		}
	}
	errs, err := tx.QueryContext(ctx, `SELECT b.app, e.code, SUM(e.count) FROM broadcast_errors e JOIN broadcasts b ON b.id = e.broadcast_id
		WHERE e.broadcast_id IN (`+in+`) AND b.dry_run = 0 GROUP BY b.app, e.code`, args...)
	if err != nil {
		return 0, fmt.Errorf("archive error counts: %w", err)
	}
	var eargs []any
	for errs.Next() {
		var app, code string
		var n uint64
		if err := errs.Scan(&app, &code, &n); err != nil {
			errs.Close()
			return 0, fmt.Errorf("archive error counts: %w", err)
		}
		eargs = append(eargs, app, code, n)
	}
	errs.Close()
	if err := errs.Err(); err != nil {
		return 0, fmt.Errorf("archive error counts: %w", err)
	}
	if len(eargs) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO stats_archive_errors (app, code, count) VALUES `+sqldb.Placeholders(len(eargs)/3, 3)+`
			ON DUPLICATE KEY UPDATE count = stats_archive_errors.count + VALUES(count)`, eargs...); err != nil {
			return 0, fmt.Errorf("archive error counts: %w", err)
		}
	}
	return deleted, nil
}
