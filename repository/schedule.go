package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"pushfan/internal/sqldb"
)

// ListFilter selects broadcasts for the list endpoint.
type ListFilter struct {
	Status  Status // "" = any
	Trigger string // "" = any
	Before  uint64 // keyset: ids below it (0 = from the newest)
	Limit   int
}

// ListBroadcasts returns broadcasts newest first by keyset on id.
func (s *Store) ListBroadcasts(ctx context.Context, f ListFilter) ([]*Broadcast, error) {
	if f.Limit <= 0 {
		return nil, fmt.Errorf("list broadcasts: limit %d must be positive", f.Limit)
	}
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.Trigger != "" {
		where = append(where, "trigger_kind = ?")
		args = append(args, f.Trigger)
	}
	if f.Before > 0 {
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	q := selectBroadcast
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list broadcasts: %w", err)
	}
	defer rows.Close()
	var out []*Broadcast
	for rows.Next() {
		b, err := scanBroadcast(rows)
		if err != nil {
			return nil, fmt.Errorf("list broadcasts: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list broadcasts: %w", err)
	}
	return out, nil
}

// LastFire is a job's most recent fire: its time and broadcast (zero and
// nil when it never fired), or a skipped fire's time.
type LastFire struct {
	FireTime  time.Time
	Broadcast *Broadcast // nil for a skipped fire
}

// LastJobFire returns the latest fire of job, fired or skipped.
func (s *Store) LastJobFire(ctx context.Context, job string) (LastFire, error) {
	var lf LastFire
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
			args = append(args, job, dbTime(f), clampText(reason, 255))
		}
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("record skipped fires of %s: %w", job, err)
		}
		fires = fires[n:]
	}
	return nil
}
