package repository

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/sqldb"
	"pushfan/lease"
)

// PlanBuiltin splits a built-in audience into chunks that follow its own
// tokens, and returns them with the snapshot (the highest token id now).
//
//   - user_ids: the audience's token ids are read (the list is capped, so
//     this is a bounded index lookup) and cut every width targets: a small
//     audience is one chunk, whatever the size of the table, and every
//     chunk's target count is known exactly.
//   - all: (lowest live token id - 1, highest id] cut every width ids, at
//     most maxChunks chunks (wider beyond); counts come later (CountChunks).
//
// An audience with no target gets no chunk: the broadcast completes empty.
func PlanBuiltin(ctx context.Context, q sqldb.Querier, a Audience, width uint64, maxChunks int) ([]lease.Plan, uint64, error) {
	if width == 0 || maxChunks <= 0 {
		return nil, 0, fmt.Errorf("plan: chunk width %d and max chunks %d must be positive", width, maxChunks)
	}
	var hi sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT MAX(id) FROM device_tokens").Scan(&hi); err != nil {
		return nil, 0, fmt.Errorf("plan: audience bounds: %w", err)
	}
	maxID := uint64(hi.Int64)
	if maxID == 0 {
		return nil, 0, nil
	}
	cond, args, empty, err := audienceFilter(a)
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("plan: %w", err)
	case empty:
		return nil, maxID, nil
	case a.All:
		var lo sql.NullInt64
		if err := q.QueryRowContext(ctx, "SELECT MIN(id) FROM device_tokens WHERE invalidated_at IS NULL").Scan(&lo); err != nil {
			return nil, 0, fmt.Errorf("plan: audience bounds: %w", err)
		}
		if !lo.Valid {
			return nil, maxID, nil
		}
		return SplitRange(uint64(lo.Int64)-1, maxID, width, maxChunks), maxID, nil
	}
	query, qargs, err := sqlx.In("SELECT t.id FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.id <= ? AND "+cond+" ORDER BY t.id",
		append([]any{maxID}, args...)...)
	if err != nil {
		return nil, 0, fmt.Errorf("plan: %w", err)
	}
	rows, err := q.QueryContext(ctx, query, qargs...)
	if err != nil {
		return nil, 0, fmt.Errorf("plan: audience ids: %w", err)
	}
	defer rows.Close()
	var plans []lease.Plan
	var prev, n uint64
	first := true
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, 0, fmt.Errorf("plan: audience ids: %w", err)
		}
		if first {
			plans = append(plans, lease.Plan{Lo: id - 1})
			first = false
		} else if n == width {
			plans[len(plans)-1].Hi, plans[len(plans)-1].Targets = prev, int64(n)
			plans = append(plans, lease.Plan{Lo: prev})
			n = 0
		}
		prev, n = id, n+1
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("plan: audience ids: %w", err)
	}
	if len(plans) > 0 {
		plans[len(plans)-1].Hi, plans[len(plans)-1].Targets = prev, int64(n)
	}
	return plans, maxID, nil
}

// SplitRange cuts (lo, hi] into chunks of width cursor values, widened so
// there are at most maxChunks; their target counts are unknown (-1).
func SplitRange(lo, hi, width uint64, maxChunks int) []lease.Plan {
	if hi <= lo {
		return nil
	}
	span := hi - lo
	w := max(width, span/uint64(maxChunks)+min(span%uint64(maxChunks), 1))
	var plans []lease.Plan
	for from := lo; from < hi; {
		to := hi
		if hi-from > w {
			to = from + w
		}
		plans = append(plans, lease.Plan{Lo: from, Hi: to, Targets: -1})
		if to == math.MaxUint64 {
			break
		}
		from = to
	}
	return plans
}

// CountChunks counts a built-in audience's targets in each of the chunks
// (bounds[i], bounds[i+1]] in one index scan: INTERVAL() finds each token's
// chunk by binary search over the bounds.
func (s *Store) CountChunks(ctx context.Context, a Audience, bounds []uint64) ([]int64, error) {
	if len(bounds) < 2 {
		return nil, nil
	}
	counts := make([]int64, len(bounds)-1)
	cond, args, empty, err := audienceFilter(a)
	if err != nil {
		return nil, fmt.Errorf("count chunks: %w", err)
	}
	if empty {
		return counts, nil
	}
	// INTERVAL(t.id - 1, b0, b1, ...) is the number of bounds <= t.id-1,
	// i.e. 1 + the chunk index for b_k < t.id <= b_k+1.
	in := strings.TrimSuffix(strings.Repeat("?,", len(bounds)-1), ",")
	full := make([]any, 0, len(bounds)+len(args)+2)
	for _, b := range bounds[:len(bounds)-1] {
		full = append(full, b)
	}
	full = append(full, bounds[0], bounds[len(bounds)-1])
	full = append(full, args...)
	q := s.db.Rebind("SELECT INTERVAL(t.id - 1, " + in + ") AS k, COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id" +
		" WHERE t.id > ? AND t.id <= ? AND " + cond + " GROUP BY k")
	rows, err := s.db.QueryContext(ctx, q, full...)
	if err != nil {
		return nil, fmt.Errorf("count chunks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k int
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("count chunks: %w", err)
		}
		if k >= 1 && k <= len(counts) {
			counts[k-1] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count chunks: %w", err)
	}
	return counts, nil
}
