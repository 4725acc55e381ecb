package lease

import (
	"context"
	"fmt"
	"time"
)

// Running is a chunk under a live lease: who is sending it and how far it
// has come (its cursor is the last stored checkpoint).
type Running struct {
	BroadcastID uint64
	Seq         int
	Class       Class
	Owner       string
	LeaseUntil  time.Time
	CursorID    uint64
	HiID        uint64
}

// ListRunning returns up to limit leased chunks of app's broadcasts,
// oldest broadcast first (for the console's cluster view). The lease
// index (status, app, lease_until) finds them without reading the pending
// queue or another app's chunks.
func (s *Store) ListRunning(ctx context.Context, app string, limit int) ([]Running, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT broadcast_id, seq, class_rank, COALESCE(lease_owner, ''), lease_until, cursor_id, hi_id
		FROM broadcast_chunks WHERE status = ? AND app = ? AND lease_until > UTC_TIMESTAMP(6) ORDER BY broadcast_id, seq LIMIT ?`, StatusLeased, app, limit)
	if err != nil {
		return nil, fmt.Errorf("running chunks: %w", err)
	}
	defer rows.Close()
	var out []Running
	for rows.Next() {
		var r Running
		if err := rows.Scan(&r.BroadcastID, &r.Seq, &r.Class, &r.Owner, &r.LeaseUntil, &r.CursorID, &r.HiID); err != nil {
			return nil, fmt.Errorf("running chunks: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("running chunks: %w", err)
	}
	return out, nil
}
