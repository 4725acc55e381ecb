package repository

import (
	"context"
	"fmt"
	"time"
)

// FinishedBetween lists the real broadcasts (not dry runs) that finished
// in [from, to) having had a send accepted: the ones an engagement
// summary is about. The window is hours wide and finished_at indexed, so
// this reads a handful of rows however many broadcasts are kept.
func (s *Store) FinishedBetween(ctx context.Context, from, to time.Time) ([]uint64, error) {
	var ids []uint64
	if err := s.db.SelectContext(ctx, &ids, `SELECT id FROM broadcasts WHERE finished_at >= ? AND finished_at < ? AND succeeded > 0 AND dry_run = 0
		ORDER BY finished_at`, dbTime(from), dbTime(to)); err != nil {
		return nil, fmt.Errorf("broadcasts finished between %s and %s: %w", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), err)
	}
	return ids, nil
}
