package repository

import (
	"context"
	"fmt"
	"time"
)

// FinishedBroadcast is a broadcast's finish: when, and its id.
type FinishedBroadcast struct {
	At time.Time `db:"finished_at"`
	ID uint64    `db:"id"`
}

// FinishedAfter lists, in finish order (time, then id), up to limit real
// broadcasts (not dry runs) that finished after (at, id) and before to
// having had a send accepted: the ones an engagement summary is about,
// from a summaries stage's cursor on. It reads one range of
// idx_broadcasts_finished (finish time, then id), from the cursor.
func (s *Store) FinishedAfter(ctx context.Context, at time.Time, id uint64, to time.Time, limit int) ([]FinishedBroadcast, error) {
	var out []FinishedBroadcast
	at = dbTime(at)
	if err := s.db.SelectContext(ctx, &out, `SELECT finished_at, id FROM broadcasts
		WHERE finished_at >= ? AND (finished_at > ? OR id > ?) AND finished_at < ? AND succeeded > 0 AND dry_run = 0
		ORDER BY finished_at, id LIMIT ?`, at, at, id, dbTime(to), limit); err != nil {
		return nil, fmt.Errorf("broadcasts finished after %s (id %d) and before %s: %w", at.Format(time.RFC3339Nano), id, to.UTC().Format(time.RFC3339), err)
	}
	for i := range out {
		out[i].At = out[i].At.UTC()
	}
	return out, nil
}
