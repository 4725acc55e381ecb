package repository

import (
	"context"
	"fmt"
	"strings"
	"time"

	"pushfan/model"
)

// CapWindow is one frequency cap as the ledger keys it (package caps):
// its window's key and how many slots a user has in it.
type CapWindow struct {
	Key string
	Max int
}

// CountCappedUsers counts the users of built-in audience a that the caps
// would withhold now: those holding every slot of some window live. It is
// driven by the ledger's live slots (the users sent to lately), joined to
// the audience, so it never scans the whole audience for a cap nobody
// is near.
func (s *Store) CountCappedUsers(ctx context.Context, a model.Audience, caps []CapWindow, now time.Time) (int64, error) {
	if len(caps) == 0 {
		return 0, nil
	}
	cond, condArgs, empty, err := audienceFilter(s.schema, a)
	if err != nil {
		return 0, fmt.Errorf("count capped users: %w", err)
	}
	if empty {
		return 0, nil
	}
	full := make([]string, len(caps))
	var args []any
	for i, c := range caps {
		full[i] = "SELECT user_id FROM frequency_slots WHERE cap = ? AND slot < ? AND expires_at > ? GROUP BY user_id HAVING COUNT(*) >= ?"
		args = append(args, c.Key, c.Max, now.UTC(), c.Max)
	}
	q := "SELECT COUNT(DISTINCT " + s.schema.tUser + ") FROM " + s.schema.from + " JOIN (" + strings.Join(full, " UNION ") +
		") f ON f.user_id = " + s.schema.uID + " WHERE " + cond
	var n int64
	if err := s.db.QueryRowContext(ctx, s.db.Rebind(q), append(args, condArgs...)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count capped users: %w", err)
	}
	return n, nil
}
