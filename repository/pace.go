package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// PaceState is what pacing a broadcast needs to know, in one read: its
// progress, how long ago it started by the database's clock, and how many
// of its chunks run now on every instance (a pace is split between the
// processes running its chunks by their share of them; a process counts
// its own runs itself, since two processes may share one instance name).
type PaceState struct {
	Targeted, Attempted int64 // attempted: succeeded + failed + canceled + capped
	Elapsed             time.Duration
	Running             int
}

// Pace reads broadcast id's PaceState: a read, so it lives here rather than
// in lease (which owns the writes). It reads the broadcast's leased chunk
// rows only (by its status index), never the rest of its chunks, however
// many there are. ErrNotFound when the broadcast is gone.
func (s *Store) Pace(ctx context.Context, id uint64) (PaceState, error) {
	var p PaceState
	var elapsedUS sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT b.targeted, b.succeeded + b.failed + b.canceled + b.capped,
			TIMESTAMPDIFF(MICROSECOND, b.started_at, UTC_TIMESTAMP(6)),
			(SELECT COUNT(*) FROM broadcast_chunks c FORCE INDEX (idx_chunks_broadcast_status)
				WHERE c.broadcast_id = b.id AND c.status = 'leased' AND c.lease_until > UTC_TIMESTAMP(6))
		FROM broadcasts b WHERE b.id = ?`, id).Scan(&p.Targeted, &p.Attempted, &elapsedUS, &p.Running)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("pace of broadcast %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("pace of broadcast %d: %w", id, err)
	}
	p.Elapsed = time.Duration(elapsedUS.Int64) * time.Microsecond
	return p, nil
}
