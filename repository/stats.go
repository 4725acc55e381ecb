package repository

import (
	"context"
	"database/sql"
	"fmt"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// targetedKnown is model.Broadcast.TargetedKnown over a broadcasts row:
// the totals add a broadcast's targeted where the API shows it, never the
// part of an audience a running plan has counted so far, nor a held
// broadcast's count before it lands.
const targetedKnown = `(status IN ('completed', 'canceled', 'failed') OR
	(planning = 0 AND status NOT IN ('planning', 'scheduled') AND (status <> 'held' OR held_counted = 1)))`

// model.Stats sums counters over all non-dry-run broadcasts, running ones
// included, and those deleted by retention (kept in the stats archive).
// Both queries run in one read-only REPEATABLE READ transaction, so Errors
// agrees with Failed even while broadcasts are progressing. apps keeps the
// totals of those apps only (nil: every app).
func (s *Store) Stats(ctx context.Context, apps []string) (model.Stats, error) {
	st := model.Stats{Errors: map[string]int64{}}
	if apps != nil && len(apps) == 0 {
		return st, nil
	}
	// One condition per table, each on its app column ("1" for every app).
	where, bWhere, args := "1", "1", []any(nil)
	if apps != nil {
		in := sqldb.InList(len(apps))
		where, bWhere = "app IN ("+in+")", "b.app IN ("+in+")"
		for _, a := range apps {
			args = append(args, a)
		}
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return model.Stats{}, fmt.Errorf("stats: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo

	// SUM over BIGINT UNSIGNED yields DECIMAL; the driver hands it over as
	// text, which database/sql parses into int64.
	err = tx.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(dry_run = 0), 0),
			COALESCE(SUM(dry_run <> 0), 0),
			COALESCE(SUM(IF(dry_run = 0 AND `+targetedKnown+`, targeted, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, succeeded, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, failed, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, canceled, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, invalidated_tokens, 0)), 0),
			COALESCE(SUM(IF(dry_run = 0, capped, 0)), 0)
		FROM broadcasts WHERE `+where, args...).Scan(
		&st.Broadcasts, &st.DryRuns, &st.Targeted, &st.Succeeded, &st.Failed, &st.Canceled, &st.InvalidatedTokens, &st.Capped)
	if err != nil {
		return model.Stats{}, fmt.Errorf("stats: totals: %w", err)
	}

	// Broadcasts removed by retention left their totals in the archive.
	var a model.Stats
	err = tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(broadcasts), 0), COALESCE(SUM(dry_runs), 0), COALESCE(SUM(targeted), 0),
			COALESCE(SUM(succeeded), 0), COALESCE(SUM(failed), 0), COALESCE(SUM(canceled), 0), COALESCE(SUM(invalidated_tokens), 0),
			COALESCE(SUM(opened), 0), COALESCE(SUM(clicked), 0), COALESCE(SUM(capped), 0)
		FROM stats_archive WHERE `+where, args...).Scan(&a.Broadcasts, &a.DryRuns, &a.Targeted, &a.Succeeded, &a.Failed, &a.Canceled, &a.InvalidatedTokens, &a.Opened, &a.Clicked, &a.Capped)
	if err != nil {
		return model.Stats{}, fmt.Errorf("stats: archive: %w", err)
	}
	st.Broadcasts += a.Broadcasts
	st.DryRuns += a.DryRuns
	st.Targeted += a.Targeted
	st.Succeeded += a.Succeeded
	st.Failed += a.Failed
	st.Canceled += a.Canceled
	st.Capped += a.Capped
	st.InvalidatedTokens += a.InvalidatedTokens
	// The events' counts are a row per broadcast, variant and type: a scan
	// of their table, never of the events.
	engagement := "SELECT COALESCE(SUM(IF(type = ?, n, 0)), 0), COALESCE(SUM(IF(type = ?, n, 0)), 0) FROM engagement_counts"
	if apps != nil {
		engagement += " c JOIN broadcasts b ON b.id = c.broadcast_id WHERE " + bWhere
	}
	err = tx.QueryRowContext(ctx, engagement, append([]any{uint8(model.EventOpened), uint8(model.EventClicked)}, args...)...).Scan(&st.Opened, &st.Clicked)
	if err != nil {
		return model.Stats{}, fmt.Errorf("stats: engagement: %w", err)
	}
	st.Opened += a.Opened
	st.Clicked += a.Clicked
	rows, err := tx.QueryContext(ctx, `SELECT code, SUM(n) FROM (
			SELECT e.code, e.count AS n FROM broadcast_errors e JOIN broadcasts b ON b.id = e.broadcast_id WHERE b.dry_run = 0 AND `+bWhere+`
			UNION ALL SELECT code, count FROM stats_archive_errors WHERE `+where+`
		) x GROUP BY code`, append(args, args...)...)
	if err != nil {
		return model.Stats{}, fmt.Errorf("stats: errors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			code string
			n    int64
		)
		if err := rows.Scan(&code, &n); err != nil {
			return model.Stats{}, fmt.Errorf("stats: errors: scan: %w", err)
		}
		st.Errors[code] = n
	}
	if err := rows.Err(); err != nil {
		return model.Stats{}, fmt.Errorf("stats: errors: %w", err)
	}
	return st, nil
}
