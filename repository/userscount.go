package repository

import (
	"context"
	"fmt"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// The state of a broadcast's count of users (users_targeted; package
// plan, users.go; migration 00045): users_count_at is when an instance
// last began one, users_count_error why one failed for good. A count is
// begun by one instance at a time (ClaimUsersCount), and never again
// after a failure for good (FailUsersCount): no replica repeats a scan
// that ran out of time, and a resumed plan does not scan again.

// MaxUsersCountError bounds broadcasts.users_count_error (VARCHAR(255)).
const MaxUsersCountError = 255

// UncountedUsers lists up to limit broadcasts still to finish whose plan
// ended more than late ago with their users not counted
// (users_targeted null), no count begun within late and none failed for
// good: their count was lost with its instance (stopped or killed
// before the count was stored), or failed on a lost connection. A count
// begun by the sweep keeps the row out of the list for late, whatever
// comes of it: rows that fail again do not hide the others. It reads the
// unfinished broadcasts only (the status index).
func (s *Store) UncountedUsers(ctx context.Context, late time.Duration, limit int) ([]*model.Broadcast, error) {
	list, err := s.readBroadcasts(ctx, ` WHERE status IN ('queued', 'running') AND planning = 0 AND users_targeted IS NULL
		AND users_count_error IS NULL AND planned_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
		AND (users_count_at IS NULL OR users_count_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND) ORDER BY id LIMIT ?`,
		late.Microseconds(), late.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("uncounted users: %w", err)
	}
	return list, nil
}

// ClaimUsersCount marks that this instance begins counting broadcast
// id's users, and reports whether it may: not when they are counted, when
// a count failed for good, or when another count began within late (a
// count ends within late: package plan's usersLate).
func (s *Store) ClaimUsersCount(ctx context.Context, id uint64, late time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE broadcasts SET users_count_at = UTC_TIMESTAMP(6)
		WHERE id = ? AND users_targeted IS NULL AND users_count_error IS NULL
		AND (users_count_at IS NULL OR users_count_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)`, id, late.Microseconds())
	if err != nil {
		return false, fmt.Errorf("broadcast %d: claim its count of users: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("broadcast %d: claim its count of users: %w", id, err)
	}
	return n == 1, nil
}

// FailUsersCount records why broadcast id's count of users failed for
// good: no instance counts it again.
func (s *Store) FailUsersCount(ctx context.Context, id uint64, reason string) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE broadcasts SET users_count_error = ? WHERE id = ? AND users_targeted IS NULL",
		sqldb.ClampRunes(reason, MaxUsersCountError), id); err != nil {
		return fmt.Errorf("broadcast %d: record its failed count of users: %w", id, err)
	}
	return nil
}
