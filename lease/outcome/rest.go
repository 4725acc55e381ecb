package outcome

import (
	"context"
	"fmt"
	"time"

	"pushfan/internal/platform/sqldb"
)

// The targets a cancel counts from the plan (a run's last checkpoint with
// CancelRest, a cancel's close of idle chunks) are never read, so no
// checkpoint lists them. They are kept as one canceled_rests row per
// chunk (migration 00039), in the transaction that counts them: the
// chunk's stored cursor, its bound, its fixed target list if any, and the
// count. Package outcomes lists them as canceled when an export or a
// look-up asks, by reading the chunk's range of the audience above that
// cursor then (outcomes/rest.go).
//
// Why not write them at the cancel: listing them there means reading up
// to the whole audience (10M targets) in the cancel's transaction, or a
// background writer whose lag an export taken right after the cancel
// would see as missing lines. A row per chunk costs a cancel nothing that
// grows with the audience.

// KeepRest keeps the rest (never read, counted canceled) of chunk seq of
// broadcast id as its last checkpoint closes it: before the close clears
// the chunk's target list and moves its cursor.
func KeepRest(ctx context.Context, tx sqldb.Execer, id, seq uint64, rest int64) error {
	if rest <= 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO canceled_rests (broadcast_id, seq, lo_id, after_id, hi_id, rest, target_ids, created_at)
			SELECT broadcast_id, seq, lo_id, cursor_id, hi_id, ?, target_ids, UTC_TIMESTAMP(6) FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ?
			ON DUPLICATE KEY UPDATE rest = rest + VALUES(rest)`, rest, id, seq); err != nil {
		return fmt.Errorf("keep the canceled rest of chunk %d/%d: %w", id, seq, err)
	}
	return nil
}

// KeepIdleRests keeps the rests of the chunks of broadcast id that a
// cancel closes idle, before it closes them. idle is the chunks' WHERE
// clause, whose arguments are the broadcast's id and the instant now: one
// INSERT … SELECT, a row per chunk.
func KeepIdleRests(ctx context.Context, tx sqldb.Execer, id uint64, idle string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO canceled_rests (broadcast_id, seq, lo_id, after_id, hi_id, rest, target_ids, created_at)
			SELECT broadcast_id, seq, lo_id, cursor_id, hi_id, GREATEST(COALESCE(targets, 0) - CAST(committed AS SIGNED), 0), target_ids, ?
			FROM broadcast_chunks`+idle+` AND COALESCE(targets, 0) > committed
			ON DUPLICATE KEY UPDATE rest = rest + VALUES(rest)`, now, id, now); err != nil {
		return fmt.Errorf("keep the canceled rests of broadcast %d: %w", id, err)
	}
	return nil
}
