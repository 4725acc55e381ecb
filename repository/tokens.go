package repository

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// Invalidation marks one token dead, with why (e.g. the FCM error code).
type Invalidation struct {
	TokenID uint64
	Token   string // used when TokenID is 0 (a named audience that does not return ids)
	Reason  string
}

// invalidateChunk bounds the IN list of one UPDATE: small enough to keep each
// statement's row locks short-lived, large enough to need few round trips.
const invalidateChunk = 1000

// maxReasonRunes is device_tokens.invalid_reason's width.
const maxReasonRunes = 64

// InvalidateTokens sets invalidated_at = at and invalid_reason on the given
// tokens, skipping those already invalid (so the first reason and time win),
// and returns how many tokens it invalidated. One UPDATE per reason and per
// 1000 ids; ids are sorted so concurrent callers lock rows in the same order.
//
// Statements are not wrapped in one transaction: each invalidation is
// independently correct, and on error the count of those already applied is
// returned along with it.
func (s *Store) InvalidateTokens(ctx context.Context, items []Invalidation, at time.Time) (int64, error) {
	return invalidateTokens(ctx, s.db, items, at)
}

// execer is what invalidateTokens needs: the pool, or a transaction (chunk
// checkpoints invalidate in the same transaction as their counters).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func invalidateTokens(ctx context.Context, db execer, items []Invalidation, at time.Time) (int64, error) {
	if len(items) == 0 {
		return 0, nil
	}
	byReason := make(map[string][]uint64)
	byToken := make(map[string][]string)
	for _, it := range items {
		r := clampText(it.Reason, maxReasonRunes)
		if it.TokenID == 0 {
			byToken[r] = append(byToken[r], it.Token)
			continue
		}
		byReason[r] = append(byReason[r], it.TokenID)
	}
	at = dbTime(at)
	var total int64
	for _, reason := range slices.Sorted(maps.Keys(byToken)) {
		toks := byToken[reason]
		slices.Sort(toks)
		toks = slices.Compact(toks)
		for chunk := range slices.Chunk(toks, invalidateChunk) {
			q, args, err := sqlx.In(`UPDATE device_tokens SET invalidated_at = ?, invalid_reason = ?
				WHERE token IN (?) AND invalidated_at IS NULL`, at, nullIfEmpty(reason), chunk)
			if err != nil {
				return total, fmt.Errorf("invalidate tokens: expand tokens: %w", err)
			}
			res, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				return total, fmt.Errorf("invalidate %d tokens (%s): %w", len(chunk), reason, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("invalidate tokens: %w", err)
			}
			total += n
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		ids := byReason[reason]
		slices.Sort(ids)
		ids = slices.Compact(ids)
		for chunk := range slices.Chunk(ids, invalidateChunk) {
			q, args, err := sqlx.In(`UPDATE device_tokens SET invalidated_at = ?, invalid_reason = ?
				WHERE id IN (?) AND invalidated_at IS NULL`, at, nullIfEmpty(reason), chunk)
			if err != nil {
				return total, fmt.Errorf("invalidate tokens: expand ids: %w", err)
			}
			res, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				return total, fmt.Errorf("invalidate %d tokens (%s): %w", len(chunk), reason, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("invalidate tokens: %w", err)
			}
			total += n
		}
	}
	return total, nil
}
