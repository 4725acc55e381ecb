package repository

import (
	"context"
	"database/sql"
	"fmt"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// JobPauses returns every paused job by name (table job_pauses).
func (s *Store) JobPauses(ctx context.Context) (map[string]model.JobPause, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT job_name, paused_at, COALESCE(paused_by, '') FROM job_pauses")
	if err != nil {
		return nil, fmt.Errorf("job pauses: %w", err)
	}
	defer rows.Close()
	out := map[string]model.JobPause{}
	for rows.Next() {
		var name string
		var p model.JobPause
		if err := rows.Scan(&name, &p.At, &p.By); err != nil {
			return nil, fmt.Errorf("job pauses: %w", err)
		}
		p.At = p.At.UTC()
		out[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job pauses: %w", err)
	}
	return out, nil
}

// JobPaused reports whether job is paused.
func (s *Store) JobPaused(ctx context.Context, job string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_pauses WHERE job_name = ?", job).Scan(&n); err != nil {
		return false, fmt.Errorf("is job %s paused: %w", job, err)
	}
	return n > 0, nil
}

// SetJobPaused pauses (paused) or resumes job, by names who; the
// request's audit entry commits with the change. It reports whether the
// state changed (false: it was so already).
func (s *Store) SetJobPaused(ctx context.Context, job string, paused bool, by string) (bool, error) {
	var changed bool
	err := sqldb.InTx(ctx, s.db.DB, s.log, "set job pause", func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if paused {
			res, err = tx.ExecContext(ctx, "INSERT IGNORE INTO job_pauses (job_name, paused_at, paused_by) VALUES (?, UTC_TIMESTAMP(6), ?)",
				job, nullIfEmpty(sqldb.ClampRunes(by, 255)))
		} else {
			res, err = tx.ExecContext(ctx, "DELETE FROM job_pauses WHERE job_name = ?", job)
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		changed = n > 0
		return audit.Write(ctx, tx) // the request's audit entry commits with the pause
	})
	if err != nil {
		return false, fmt.Errorf("set job %s paused=%v: %w", job, paused, err)
	}
	return changed, nil
}
