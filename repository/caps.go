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

// CappedAmong returns which of users ids the caps would withhold now
// (those holding every slot of some window live), in one statement: the
// users of one page of a named audience, whose rows are known only by
// paging its SQL (a preview counts them along the walk). It reads the
// ledger by primary key, a range per user and cap.
func (s *Store) CappedAmong(ctx context.Context, caps []CapWindow, ids []uint64, now time.Time) ([]uint64, error) {
	if len(caps) == 0 || len(ids) == 0 {
		return nil, nil
	}
	in := "?" + strings.Repeat(", ?", len(ids)-1)
	parts := make([]string, len(caps))
	var args []any
	for i, c := range caps {
		// FORCE INDEX: as the ledger's own reads (package caps), a plan
		// from small-table statistics could scan the table for a long IN
		// list.
		parts[i] = "SELECT user_id FROM frequency_slots FORCE INDEX (PRIMARY) WHERE cap = ? AND slot < ? AND expires_at > ? AND user_id IN (" + in +
			") GROUP BY user_id HAVING COUNT(*) >= ?"
		args = append(args, c.Key, c.Max, now.UTC())
		for _, id := range ids {
			args = append(args, id)
		}
		args = append(args, c.Max)
	}
	rows, err := s.db.QueryContext(ctx, strings.Join(parts, " UNION "), args...)
	if err != nil {
		return nil, fmt.Errorf("capped users of a page: %w", err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("capped users of a page: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("capped users of a page: %w", err)
	}
	return out, nil
}
