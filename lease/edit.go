package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/audit"
	"pushfan/model"
)

// ErrStarted: the broadcast is no longer scheduled or held (the promoter
// made it planning, a release let it go now, or it was canceled), so its
// message and time can no longer change.
var ErrStarted = errors.New("broadcast has started or ended")

// ErrReleased: a held broadcast was released and is waiting for its time.
// What the approver released may not change behind their back (four
// eyes): an edit of it is refused; cancel it and submit again.
var ErrReleased = errors.New("broadcast was released; its approved message cannot change")

// Edit is the new message and start of a broadcast that has not started.
type Edit struct {
	Message model.Message
	// SendAt is the new send time (nil: none, a held broadcast that is
	// planned when released); StartsAt the start it makes (the spread).
	SendAt, StartsAt *time.Time
}

// EditUnstarted stores e as broadcast id's message and start, in one
// transaction with the row locked, only while the broadcast is scheduled
// or held (and, when held, not released): the state machine's "scheduled,
// held → same" edge. It races only with PromoteDue, ReleaseHeld and Stop,
// which lock the same row: whichever locks it first wins. PromoteDue skips
// a row an edit holds (SKIP LOCKED) and sees its new start on its next
// sweep; an edit that waited for a promotion, a release or a cancel finds
// the new status and answers ErrStarted (or ErrReleased), wrapped naming
// the status. It returns the status the row kept; ErrNotFound for an
// unknown id. The request's audit entry commits with the change.
func (s *Store) EditUnstarted(ctx context.Context, id uint64, e Edit) (model.Status, error) {
	msg, err := json.Marshal(e.Message)
	if err != nil {
		return "", fmt.Errorf("edit broadcast %d: encode message: %w", id, err)
	}
	var status model.Status
	err = s.inTx(ctx, "edit unstarted broadcast", func(tx *sql.Tx) error {
		var cur string
		var released bool
		err := tx.QueryRowContext(ctx, `SELECT status, released_at IS NOT NULL FROM broadcasts WHERE id = ? FOR UPDATE`, id).Scan(&cur, &released)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		case err != nil:
			return fmt.Errorf("lock broadcast: %w", err)
		case model.Status(cur) != model.StatusScheduled && model.Status(cur) != model.StatusHeld:
			return fmt.Errorf("broadcast %d is %s: %w", id, cur, ErrStarted)
		case released:
			return fmt.Errorf("broadcast %d is %s after its release: %w", id, cur, ErrReleased)
		}
		status = model.Status(cur)
		if status == model.StatusScheduled && e.StartsAt == nil && e.SendAt == nil {
			return fmt.Errorf("broadcast %d: a scheduled broadcast needs a send time", id)
		}
		// The status guard repeats the check the lock made: the row
		// cannot have moved, but the statement says what it relies on.
		res, err := tx.ExecContext(ctx, `UPDATE broadcasts SET message = ?, send_at = ?, starts_at = ?
			WHERE id = ? AND status = ? AND released_at IS NULL`, string(msg), editTime(e.SendAt), editTime(e.StartsAt), id, cur)
		if err != nil {
			return fmt.Errorf("edit: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("broadcast %d moved under its lock (%d rows, %v): %w", id, n, err, ErrStarted)
		}
		return audit.Write(ctx, tx)
	})
	return status, err
}

// editTime is an optional time as the row's DATETIME(6) column takes it.
func editTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Truncate(time.Microsecond)
}
