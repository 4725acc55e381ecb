package lease

import (
	"context"
	"fmt"

	"pushfan/internal/platform/sqldb"
)

// Listing is one target's outcome as the reader resolves it: the highest
// precedence of its listings, the later claim's among equals.
type Listing struct {
	TargetOutcome
	epoch, ckptSeq uint64
}

// better reports whether l beats m as a target's outcome.
func (l Listing) better(m Listing) bool {
	if p, q := l.Kind.Precedence(), m.Kind.Precedence(); p != q {
		return p > q
	}
	if l.epoch != m.epoch {
		return l.epoch > m.epoch
	}
	return l.ckptSeq > m.ckptSeq
}

// LookupOutcome returns the kept outcome of the target at cursor in
// broadcast id, false when no row lists it (not in the audience, never
// read before a cancel, or past retention). It reads the rows whose
// (broadcast_id, hi, lo) index entry may hold the cursor, hi in [cursor,
// cursor+MaxSpan]: a bounded range, decoding only the rows that do.
func LookupOutcome(ctx context.Context, q sqldb.Querier, id, cursor uint64) (TargetOutcome, bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT epoch, ckpt_seq, lo, outcomes FROM target_outcomes FORCE INDEX (target_outcomes_hi)
		WHERE broadcast_id = ? AND hi BETWEEN ? AND ? AND lo <= ?`, id, cursor, cursor+MaxSpan, cursor)
	if err != nil {
		return TargetOutcome{}, false, fmt.Errorf("look outcome up: %w", err)
	}
	defer rows.Close()
	var best Listing
	found := false
	for rows.Next() {
		var l Listing
		var lo uint64
		var b []byte
		if err := rows.Scan(&l.epoch, &l.ckptSeq, &lo, &b); err != nil {
			return TargetOutcome{}, false, fmt.Errorf("look outcome up: %w", err)
		}
		o, ok, err := FindOutcome(lo, b, cursor)
		if err != nil {
			return TargetOutcome{}, false, fmt.Errorf("broadcast %d: %w", id, err)
		}
		if !ok {
			continue
		}
		l.TargetOutcome = o
		if !found || l.better(best) {
			best, found = l, true
		}
	}
	if err := rows.Err(); err != nil {
		return TargetOutcome{}, false, fmt.Errorf("look outcome up: %w", err)
	}
	return best.TargetOutcome, found, nil
}
