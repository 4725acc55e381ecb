package repository

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

const (
	// failureBatch rows per INSERT: with 1 KiB messages a statement stays
	// near 0.5 MiB, far below max_allowed_packet.
	failureBatch       = 500
	maxFailureMsgRunes = 1024 // broadcast_failures.message is VARCHAR(1024)
)

// insertFailures writes fs inside tx (a chunk checkpoint's).
func insertFailures(ctx context.Context, tx *sql.Tx, fs []model.Failure) error {
	args := make([]any, 0, 7*min(len(fs), failureBatch))
	for batch := range slices.Chunk(fs, failureBatch) {
		args = args[:0]
		for _, f := range batch {
			var created any // NULL → IFNULL picks the database clock
			if !f.CreatedAt.IsZero() {
				created = dbTime(f.CreatedAt)
			}
			args = append(args, f.BroadcastID, f.TokenID, f.UserID,
				sqldb.ClampRunes(f.Code, maxCodeRunes), sqldb.ClampRunes(f.Message, maxFailureMsgRunes),
				max(f.Attempts, 0), created)
		}
		q := "INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code, message, attempts, created_at) VALUES " +
			sqldb.RepeatRows(len(batch), "(?, ?, ?, ?, ?, ?, IFNULL(?, UTC_TIMESTAMP(6)))")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert %d failures: %w", len(batch), err)
		}
	}
	return nil
}

// ListFailures returns up to limit failures of a broadcast with id > after,
// in id order, only those f keeps (a code, a user). Pass the last ID back
// as after for the next page. Never returns a nil slice.
func (s *Store) ListFailures(ctx context.Context, broadcastID uint64, f model.FailureFilter, after uint64, limit int) ([]model.Failure, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list failures: limit %d must be positive", limit)
	}
	// Each filter is an equality ahead of id in one index, so a page is
	// one range read however many failures the broadcast has:
	// (broadcast_id, id), (broadcast_id, code, id), and for a user
	// (broadcast_id, user_id, id), whose range is that user's few rows
	// (a few per device at most), the code then checked on them.
	q := "SELECT id, broadcast_id, token_id, user_id, code, message, attempts, created_at FROM broadcast_failures WHERE broadcast_id = ?"
	args := []any{broadcastID}
	if f.UserID != 0 {
		q += " AND user_id = ?"
		args = append(args, f.UserID)
	}
	if f.Code != "" {
		q += " AND code = ?"
		args = append(args, f.Code)
	}
	q += " AND id > ? ORDER BY id LIMIT ?"
	args = append(args, after, limit)
	out := make([]model.Failure, 0, min(limit, 1000))
	if err := s.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("list failures of broadcast %d: %w", broadcastID, err)
	}
	for i := range out {
		out[i].CreatedAt = out[i].CreatedAt.UTC()
	}
	return out, nil
}

// WriteOutcomes stores a checkpoint's failure rows and invalidates its dead
// tokens inside tx, the checkpoint's own transaction (package lease runs
// it as the checkpoint's Effects), and returns how many tokens it
// invalidated.
func WriteOutcomes(ctx context.Context, tx *sql.Tx, fs []model.Failure, dead []Invalidation) (int64, error) {
	if len(fs) > 0 {
		if err := insertFailures(ctx, tx, fs); err != nil {
			return 0, err
		}
	}
	return invalidateTokens(ctx, tx, dead, time.Now())
}
