package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
	"pushfan/repository"
)

// ErrNotHeld: the broadcast is not in status held (already released,
// canceled, expired, or never held), so it cannot be released.
var ErrNotHeld = errors.New("broadcast is not held")

// HoldExpired is the error a held broadcast ends with when nobody released
// it in time (status canceled).
const HoldExpired = "hold expired"

// SetHeldTargets records a held broadcast's counted audience. It only
// touches a broadcast that is still held: a count that lands after a
// release or a cancel must not overwrite what those stored.
func (s *Store) SetHeldTargets(ctx context.Context, id uint64, n int64) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE broadcasts SET targeted = ?, held_counted = 1 WHERE id = ? AND status = 'held'", n, id); err != nil {
		return fmt.Errorf("held broadcast %d: set targeted: %w", id, err)
	}
	return nil
}

// ReleaseHeld lets a held broadcast go, recording by (its name as
// released_by, the actor in released_by_kind and released_by_id), in
// one transaction with the row locked: one whose start (starts_at, else
// send_at) is still ahead becomes scheduled (PromoteDue makes it planning
// when due); any other becomes planning, and any instance plans it (its
// audience snapshotted at this moment), exactly as a submit would have
// stored it. It returns the new status; ErrNotHeld (wrapped, naming the
// status) when the broadcast is not held, ErrNotFound for an unknown id.
func (s *Store) ReleaseHeld(ctx context.Context, id uint64, by model.Actor) (model.Status, error) {
	var status model.Status
	err := s.inTx(ctx, "release held broadcast", func(tx *sql.Tx) error {
		var cur string
		var ahead bool
		err := tx.QueryRowContext(ctx, `SELECT status, COALESCE(COALESCE(starts_at, send_at) > UTC_TIMESTAMP(6), 0)
			FROM broadcasts WHERE id = ? FOR UPDATE`, id).Scan(&cur, &ahead)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		case err != nil:
			return fmt.Errorf("lock broadcast: %w", err)
		case model.Status(cur) != model.StatusHeld:
			return fmt.Errorf("broadcast %d is %s: %w", id, cur, ErrNotHeld)
		}
		status = model.StatusPlanning
		if ahead {
			status = model.StatusScheduled
		}
		var released, kind, actorID any // NULL for no name, no actor
		if name := sqldb.ClampRunes(by.Name, repository.MaxCreatedByRunes); name != "" {
			released = name
		}
		if by.Kind != "" {
			kind, actorID = string(by.Kind), sqldb.ClampRunes(by.ID, repository.MaxActorIDRunes)
		}
		// targeted was the held count, an estimate: the plan counts it
		// again, exactly.
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = ?, planning = ?, targeted = 0,
				released_by = ?, released_by_kind = ?, released_by_id = ?, released_at = UTC_TIMESTAMP(6) WHERE id = ?`,
			string(status), !ahead, released, kind, actorID, id); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		return audit.Write(ctx, tx) // the request's entry commits with the release
	})
	return status, err
}

// ExpireHolds cancels up to 100 held broadcasts whose hold_expires_at has
// passed (by the database's clock), with error HoldExpired and their whole
// audience counted canceled, and returns their ids. The row locks with SKIP
// LOCKED and the status guard in the UPDATE make each expiry happen on
// exactly one instance however many look at once, and never to one a
// concurrent release or cancel got first.
func (s *Store) ExpireHolds(ctx context.Context) ([]uint64, error) {
	return s.sweep(ctx, "expire held broadcasts", `SELECT id FROM broadcasts FORCE INDEX (idx_broadcasts_hold)
		WHERE status = 'held' AND hold_expires_at <= UTC_TIMESTAMP(6) ORDER BY hold_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
		func(tx *sql.Tx, ids []uint64) error {
			if _, err := endUnstarted(ctx, tx, model.StatusCanceled, HoldExpired, ids, model.StatusHeld); err != nil {
				return err
			}
			for _, id := range ids { // locked held above: each one ended
				if err := s.event(ctx, tx, EventFinished, id); err != nil {
					return err
				}
			}
			return nil
		})
}

// PromoteDue makes up to 100 scheduled broadcasts whose start (starts_at:
// send_at or the fire time plus the start spread; send_at on older rows)
// has come planning, and returns their ids: their audiences are
// snapshotted when they are due, and planned by any instance, each on its
// own (a broadcast that cannot be planned fails alone). Row locks with
// SKIP LOCKED make each promotion happen on exactly one instance however
// many poll at once; a promotion repeated after a lost commit answer finds
// nothing due.
func (s *Store) PromoteDue(ctx context.Context) ([]uint64, error) {
	return s.sweep(ctx, "promote scheduled broadcasts", `SELECT id FROM broadcasts WHERE status = 'scheduled' AND COALESCE(starts_at, send_at) <= UTC_TIMESTAMP(6)
		ORDER BY COALESCE(starts_at, send_at), id LIMIT 100 FOR UPDATE SKIP LOCKED`,
		func(tx *sql.Tx, ids []uint64) error {
			in, args := idArgs(ids)
			_, err := tx.ExecContext(ctx, "UPDATE broadcasts SET status = 'planning', planning = 1 WHERE status = 'scheduled' AND id IN ("+in+")", args...)
			return err
		})
}

// sweep is one transaction of a timed sweep: it locks the rows q selects
// (SKIP LOCKED: each row is swept by one instance however many look at
// once), applies the transition to them, and returns their ids.
func (s *Store) sweep(ctx context.Context, what, q string, apply func(tx *sql.Tx, ids []uint64) error) ([]uint64, error) {
	var ids []uint64
	err := s.inTx(ctx, what, func(tx *sql.Tx) error {
		var err error
		if ids, err = queryIDs(ctx, tx, q); err != nil {
			return fmt.Errorf("select: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		return apply(tx, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ids, nil
}

// queryIDs runs q, a SELECT of ids (FOR UPDATE SKIP LOCKED in a sweep's
// transaction), and returns them.
func queryIDs(ctx context.Context, db sqldb.Querier, q string, args ...any) ([]uint64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// idArgs is an IN list's placeholders and arguments.
func idArgs(ids []uint64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return sqldb.InList(len(ids)), args
}
