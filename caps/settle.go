package caps

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"pushfan/internal/platform/sqldb"
)

// Settle stores, inside a chunk checkpoint's transaction tx, what became
// of broadcast b's users in it: sent are the users with a device sent,
// unsent those whose devices in it all ended without a send (canceled,
// failed for good, a dead token). A reserved user in unsent, with no
// device sent before, is released: its slots are given back with the
// outcomes that free them, and a device of theirs read later reserves
// again. It returns how many users it released.
func (l *Ledger) Settle(ctx context.Context, tx *sql.Tx, b uint64, sent, unsent []uint64) (int64, error) {
	sent, unsent = sortedUnique(sent), sortedUnique(unsent)
	for batch := range slices.Chunk(sent, maxUsersPerStatement) {
		args := make([]any, 0, len(batch)+1)
		args = append(args, b)
		for _, id := range batch {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE frequency_users SET state = 3 WHERE broadcast_id = ? AND state IN (0, 1)
			AND user_id IN (`+sqldb.InList(len(batch))+`)`, args...); err != nil {
			return 0, fmt.Errorf("mark capped users sent: %w", err)
		}
	}
	var released int64
	for batch := range slices.Chunk(unsent, maxUsersPerStatement) {
		states, err := readStates(ctx, tx, b, batch, true)
		if err != nil {
			return 0, err
		}
		var give []uint64
		args := []any{b}
		for _, id := range batch {
			if states[id] == stateReserved {
				give = append(give, id)
				args = append(args, id)
			}
		}
		if len(give) == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE frequency_users SET state = 0 WHERE broadcast_id = ? AND user_id IN (`+
			sqldb.InList(len(give))+`)`, args...); err != nil {
			return 0, fmt.Errorf("release capped users: %w", err)
		}
		if err := l.dropSlots(ctx, tx, b, give); err != nil {
			return 0, err
		}
		released += int64(len(give))
	}
	return released, nil
}

func sortedUnique(ids []uint64) []uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// sweepBatch is how many rows one retention statement deletes: small, so
// that it never holds locks a reservation waits on for long.
const sweepBatch = 5000

// Sweep deletes what the ledger no longer needs: slots that expired
// before expiredBefore (free anyway: deleting them only keeps the table
// small) and the answers of broadcasts that ended before finishedBefore
// (no device of theirs is read again). It returns the rows deleted.
func (l *Ledger) Sweep(ctx context.Context, expiredBefore, finishedBefore time.Time) (int64, error) {
	var total int64
	for _, st := range []struct {
		name, query string
		before      time.Time
	}{
		{"expired frequency slots", "DELETE FROM frequency_slots WHERE expires_at < ? LIMIT ?", expiredBefore},
		{"finished broadcasts' cap answers", `DELETE FROM frequency_users WHERE broadcast_id IN (
			SELECT id FROM broadcasts WHERE status IN ('completed', 'canceled', 'failed') AND finished_at < ?) LIMIT ?`, finishedBefore},
	} {
		for {
			res, err := l.db.ExecContext(ctx, st.query, st.before.UTC(), sweepBatch)
			if err != nil {
				return total, fmt.Errorf("delete %s: %w", st.name, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("delete %s: %w", st.name, err)
			}
			total += n
			if n < sweepBatch {
				break
			}
		}
	}
	return total, nil
}
