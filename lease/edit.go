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

// EditUnstarted's refusals: the broadcast is no longer scheduled or held;
// it is released (what an approver released may not change).
var ErrStarted, ErrReleased = errors.New("broadcast has started or ended"), errors.New("broadcast was released; its approved message cannot change")

// EditUnstarted stores m, sendAt and startsAt (nil: none) on broadcast id,
// its row locked, while it is scheduled or held and not released; the
// status stays. PromoteDue skips a row an edit holds (SKIP LOCKED) and
// sees its new start next sweep; an edit that waited for a promotion,
// release or cancel answers ErrStarted or ErrReleased, wrapped naming the
// status. The request's audit entry commits with the change.
func (s *Store) EditUnstarted(ctx context.Context, id uint64, m model.Message, sendAt, startsAt *time.Time) error {
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("edit broadcast %d: encode message: %w", id, err)
	}
	return s.inTx(ctx, "edit unstarted broadcast", func(tx *sql.Tx) error {
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
		// A nil time is NULL (database/sql dereferences pointers).
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET message = ?, send_at = ?, starts_at = ? WHERE id = ? AND status = ?`,
			string(msg), sendAt, startsAt, id, cur); err != nil {
			return fmt.Errorf("edit: %w", err)
		}
		return audit.Write(ctx, tx)
	})
}
