package repository

import (
	"context"
	"fmt"
	"math"
	"strconv"
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

// CountAudienceUsers is how many users hold the targets
// CountAudienceExcluded counts (its count, not its stale or no-consent
// ones): the users a broadcast to a would reach, each once however many
// devices they have.
func (s *Store) CountAudienceUsers(ctx context.Context, a model.Audience) (int64, error) {
	return s.CountPlannedUsers(ctx, nil, a, math.MaxUint64)
}

// CountPlannedUsers is CountAudienceUsers over the tokens up to upto: a
// plan's snapshot (PlanPage reads no token above it), so that the users
// of a planned broadcast are counted over the tokens its plan read, with
// the same rule (stale tokens and users without consent left out, as
// the plan leaves them out of targeted). One statement: a scan of the
// audience's tokens, 1–4 s a million (docs/CAPACITY.md). q is a
// snapshot (SnapshotTx), or nil for the pool.
func (s *Store) CountPlannedUsers(ctx context.Context, q sqldb.Querier, a model.Audience, upto uint64) (int64, error) {
	return s.CountBroadcastUsers(ctx, q, a, upto, 0, 0)
}

// CountBroadcastUsers is CountPlannedUsers for broadcast id (0: none),
// under a limit the server keeps (sqldb.TimeLimited; 0: none). A token
// the broadcast's own sends found dead (a failure of the broadcast's, on
// the index (broadcast_id, token_id)) counts as live: the plan counted
// it live before its chunk sent to it, so a count that starts after
// sends began (a takeover, the sweep's recount) counts the users the
// plan did. A token another broadcast found dead meanwhile, or that its
// user unregistered, is not counted: the count may be short of the plan
// by those.
func (s *Store) CountBroadcastUsers(ctx context.Context, q sqldb.Querier, a model.Audience, upto, id uint64, limit time.Duration) (int64, error) {
	if q == nil {
		q = s.db
	}
	open := s.schema.Open().withOwnDead(id)
	sc, keep := open, "1"
	if open.flagged != nil {
		sc, keep = open.flagged, "NOT "+open.staleValue
	}
	if s.schema.ConsentRule() {
		// As CountAudienceExcluded's SUM reads it: a NULL answer is not a refusal.
		keep += " AND NOT COALESCE((" + s.schema.consent.state + ") & 1 = 0, 0)"
	}
	cond, args, empty, err := audienceFilter(sc, a)
	if err != nil {
		return 0, fmt.Errorf("count audience users: %w", err)
	}
	if empty {
		return 0, nil
	}
	if upto != math.MaxUint64 {
		cond = "(" + cond + ") AND " + sc.tID + " <= ?"
		args = append(args, upto)
	}
	var n int64
	stmt := s.db.Rebind(sqldb.TimeLimited("SELECT COUNT(DISTINCT CASE WHEN "+keep+" THEN "+sc.tUser+" END) FROM "+sc.from+" WHERE "+cond, limit))
	if err := q.QueryRowContext(ctx, stmt, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count audience users: %w", err)
	}
	return n, nil
}

// withOwnDead is sc whose tokens include those broadcast id's sends
// found dead (CountBroadcastUsers); sc itself for id 0.
func (sc *Schema) withOwnDead(id uint64) *Schema {
	if id == 0 {
		return sc
	}
	c := *sc
	c.valid = "(" + sc.valid + " OR EXISTS (SELECT 1 FROM broadcast_failures f WHERE f.broadcast_id = " +
		strconv.FormatUint(id, 10) + " AND f.token_id = " + sc.tID + "))"
	return c.build()
}
