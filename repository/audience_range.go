package repository

import (
	"context"
	"fmt"
)

// CountAudienceRange counts the targets of a whose token id is in
// (after, upto]: a broadcast's remaining audience when it stops early, with
// upto the highest token id that existed when it started.
func (s *Store) CountAudienceRange(ctx context.Context, a Audience, after, upto uint64) (int64, error) {
	if upto <= after {
		return 0, nil
	}
	cond, args, empty, err := audienceFilter(a)
	if err != nil {
		return 0, fmt.Errorf("count audience range: %w", err)
	}
	if empty {
		return 0, nil
	}
	full := make([]any, 0, len(args)+2)
	full = append(full, after, upto)
	full = append(full, args...)
	var n int64
	q := s.db.Rebind("SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.id > ? AND t.id <= ? AND " + cond)
	if err := s.db.QueryRowContext(ctx, q, full...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count audience range (%d, %d]: %w", after, upto, err)
	}
	return n, nil
}
