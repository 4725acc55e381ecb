package caps

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"

	"pushfan/internal/platform/sqldb"
)

// A resend's slots are its root's (Broadcast.Root): the original and all
// its resends hold one slot per user and window between them. A slot is
// given back when the send it was taken for did not happen; for a resend
// that is a slot it took itself (frequency_slots.taker), never the one
// the original, or a finished resend, was sent under, and only when no
// other resend of the root still shares it: two resends of one original
// running at once reserve the same users, one takes the slot and the
// other finds it held. The resends running say which users they share
// (frequency_shares, written before they read the slots); the one giving
// a slot back while another shares it hands the slot over to that one
// (taker), which gives it back in turn if it does not send either.

// shareQuery records rows users as shared by one resend (shareArgs).
func shareQuery(rows int) string {
	return `INSERT INTO frequency_shares (broadcast_id, user_id, root) VALUES ` + sqldb.Placeholders(rows, 3) +
		` ON DUPLICATE KEY UPDATE root = VALUES(root)`
}

func shareArgs(b Broadcast, ids []uint64) []any {
	args := make([]any, 0, 3*len(ids))
	for _, id := range ids {
		args = append(args, b.ID, id, b.owner())
	}
	return args
}

// giveBack gives back, in tx, the slots b holds for ids: users it
// reserved and will not send (released, or capped by a cap found full
// after it took another's slot).
func giveBack(ctx context.Context, tx *sql.Tx, b Broadcast, ids []uint64) error {
	for batch := range slices.Chunk(ids, maxUsersPerStatement) {
		var err error
		if b.resend() {
			err = giveBackShared(ctx, tx, b, batch)
		} else {
			err = dropSlots(ctx, tx, b.ID, batch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dropSlots deletes every slot b holds for ids (a broadcast that is no
// resend: every slot it holds, it took).
func dropSlots(ctx context.Context, q sqldb.Execer, b uint64, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, b)
	for _, id := range ids {
		args = append(args, id)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM frequency_slots WHERE broadcast_id = ? AND user_id IN (`+sqldb.InList(len(ids))+`)`, args...); err != nil {
		return fmt.Errorf("release frequency slots: %w", err)
	}
	return nil
}

// giveBackShared gives back resend b's shares of ids: the slots b took
// for a user no other resend of the root shares are deleted, those
// another one shares go to it. The root's rows of the users are read
// with locks first: a resend sharing one of them meanwhile waits for tx,
// then reads its slots (given back, or handed to it).
func giveBackShared(ctx context.Context, tx *sql.Tx, b Broadcast, ids []uint64) error {
	args := make([]any, 0, len(ids)+1)
	args = append(args, b.owner())
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := tx.QueryContext(ctx, `SELECT user_id, broadcast_id FROM frequency_shares FORCE INDEX (idx_frequency_shares_root)
		WHERE root = ? AND user_id IN (`+sqldb.InList(len(ids))+`) ORDER BY user_id, broadcast_id FOR UPDATE`, args...)
	if err != nil {
		return fmt.Errorf("read shared cap slots: %w", err)
	}
	other := map[uint64]uint64{} // user: a resend sharing them besides b
	for rows.Next() {
		var user, holder uint64
		if err := rows.Scan(&user, &holder); err != nil {
			rows.Close()
			return fmt.Errorf("read shared cap slots: %w", err)
		}
		if _, ok := other[user]; !ok && holder != b.ID {
			other[user] = holder
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("read shared cap slots: %w", err)
	}
	args[0] = b.ID
	if _, err := tx.ExecContext(ctx, `DELETE FROM frequency_shares WHERE broadcast_id = ? AND user_id IN (`+sqldb.InList(len(ids))+`)`, args...); err != nil {
		return fmt.Errorf("give back shared cap slots: %w", err)
	}
	var drop []uint64
	to := map[uint64][]uint64{} // the resend a slot goes to: its users
	for _, id := range ids {
		if h, ok := other[id]; ok {
			to[h] = append(to[h], id)
		} else {
			drop = append(drop, id)
		}
	}
	if len(drop) > 0 {
		if err := slotsTakenBy(ctx, tx, "DELETE FROM frequency_slots", b, drop); err != nil {
			return fmt.Errorf("release frequency slots: %w", err)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(to)) {
		if err := slotsTakenBy(ctx, tx, fmt.Sprintf("UPDATE frequency_slots SET taker = %d", h), b, to[h]); err != nil {
			return fmt.Errorf("hand frequency slots over: %w", err)
		}
	}
	return nil
}

// slotsTakenBy runs stmt (a DELETE or an UPDATE … SET of frequency_slots)
// on the slots of ids that b took under its owner.
func slotsTakenBy(ctx context.Context, tx *sql.Tx, stmt string, b Broadcast, ids []uint64) error {
	args := make([]any, 0, len(ids)+2)
	args = append(args, b.owner(), b.ID)
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := tx.ExecContext(ctx, stmt+` WHERE broadcast_id = ? AND taker = ? AND user_id IN (`+sqldb.InList(len(ids))+`)`, args...)
	return err
}
