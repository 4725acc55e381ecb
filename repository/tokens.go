package repository

import (
	"cmp"
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
	byID := make(map[string][]uint64)
	byToken := make(map[string][]string) // named audiences may not return token ids
	for _, it := range items {
		r := clampText(it.Reason, maxReasonRunes)
		if it.TokenID == 0 {
			byToken[r] = append(byToken[r], it.Token)
		} else {
			byID[r] = append(byID[r], it.TokenID)
		}
	}
	at = dbTime(at)
	n, err := invalidateWhere(ctx, db, "id", byID, at)
	if err != nil {
		return n, err
	}
	m, err := invalidateWhere(ctx, db, "token", byToken, at)
	return n + m, err
}

// invalidateWhere runs one UPDATE per reason and per invalidateChunk keys
// of column; keys are sorted so concurrent callers lock rows in one order.
func invalidateWhere[K cmp.Ordered](ctx context.Context, db execer, column string, byReason map[string][]K, at time.Time) (int64, error) {
	var total int64
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		keys := byReason[reason]
		slices.Sort(keys)
		keys = slices.Compact(keys)
		for chunk := range slices.Chunk(keys, invalidateChunk) {
			q, args, err := sqlx.In(`UPDATE device_tokens SET invalidated_at = ?, invalid_reason = ?
				WHERE `+column+` IN (?) AND invalidated_at IS NULL`, at, nullIfEmpty(reason), chunk)
			if err != nil {
				return total, fmt.Errorf("invalidate tokens: expand %s: %w", column, err)
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
