package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// LastJobFire returns the latest fire of job, fired or skipped.
func (s *Store) LastJobFire(ctx context.Context, job string) (model.LastFire, error) {
	var lf model.LastFire
	var fired, skipped sql.NullTime
	var id sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT MAX(fire_time) FROM broadcasts WHERE job_name = ?),
		(SELECT id FROM broadcasts WHERE job_name = ? ORDER BY fire_time DESC, id DESC LIMIT 1),
		(SELECT MAX(fire_time) FROM cron_skipped_fires WHERE job_name = ?)`, job, job, job).Scan(&fired, &id, &skipped)
	if err != nil {
		return lf, fmt.Errorf("last fire of %s: %w", job, err)
	}
	switch {
	case skipped.Valid && (!fired.Valid || skipped.Time.After(fired.Time)):
		lf.FireTime = skipped.Time.UTC()
	case fired.Valid:
		lf.FireTime = fired.Time.UTC()
		b, err := s.GetBroadcast(ctx, uint64(id.Int64))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return lf, err
		}
		lf.Broadcast = b
	}
	return lf, nil
}

// RecordSkippedFires notes fires missed beyond the job's catch-up window.
func (s *Store) RecordSkippedFires(ctx context.Context, job string, fires []time.Time, reason string) error {
	for len(fires) > 0 {
		n := min(len(fires), 500)
		q := "INSERT IGNORE INTO cron_skipped_fires (job_name, fire_time, reason) VALUES " + sqldb.RepeatRows(n, "(?, ?, ?)")
		args := make([]any, 0, 3*n)
		for _, f := range fires[:n] {
			args = append(args, job, dbTime(f), sqldb.ClampRunes(reason, 255))
		}
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("record skipped fires of %s: %w", job, err)
		}
		fires = fires[n:]
	}
	return nil
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
