package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Audience says who a broadcast is for: everyone, or the listed users. The
// zero value is the empty audience.
type Audience struct {
	All     bool     `json:"all,omitempty"`
	UserIDs []uint64 `json:"user_ids,omitempty"`
	// Name selects a named SQL audience from the configuration (package
	// audience pages it, not this file), with its bound Params as JSON.
	Name   string          `json:"name,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Target is one device token to send to.
type Target struct {
	TokenID uint64 `db:"id"`
	UserID  uint64 `db:"user_id"`
	Token   string `db:"token"`
}

// errAmbiguousAudience guards against the costly mistake of treating
// {"all":true,"user_ids":[...]} as "all".
var errAmbiguousAudience = errors.New("audience sets both all and user_ids")

// audienceFilter returns the WHERE conditions (on device_tokens t joined to
// users u) for a, with their arguments. empty is true when a selects nobody,
// so callers can skip the query.
//
// The audience rule (the contract in shared/DESIGN.md): one target per valid token
// (invalidated_at IS NULL) of each user with push_enabled = 1 in the audience.
// Tokens whose user row is missing are not targeted (the inner join).
func audienceFilter(a Audience) (cond string, args []any, empty bool, err error) {
	const base = "t.invalidated_at IS NULL AND u.push_enabled = 1"
	switch {
	case a.Name != "":
		return "", nil, false, fmt.Errorf("named audience %q is paged by package audience, not by SQL here", a.Name)
	case a.All && len(a.UserIDs) > 0:
		return "", nil, false, errAmbiguousAudience
	case a.All:
		return base, nil, false, nil
	case len(a.UserIDs) == 0:
		return "", nil, true, nil
	}
	// sqlx.In expands the slice into one placeholder per id. With Open's
	// interpolateParams there is no placeholder cap, but the list is resent
	// with every page: user_ids audiences are meant for thousands of users,
	// not millions (use All or an operator table for those).
	cond, args, err = sqlx.In(base+" AND t.user_id IN (?)", a.UserIDs)
	if err != nil {
		return "", nil, false, fmt.Errorf("expand user_ids: %w", err)
	}
	return cond, args, false, nil
}

// AudiencePage appends to dst[:0] up to limit targets of a whose token id is
// in (after, upto], in token id order, and returns the slice. Call it again
// with the last TokenID as after until it returns fewer than limit targets.
// The upper bound is a chunk's: no page reads past it.
//
// Keyset paging (not OFFSET) keeps every page an index range scan, however
// deep into the audience it is, and never skips or repeats a token while
// other rows are inserted or invalidated concurrently. Rows are scanned
// straight into dst's existing backing array (no per-row struct through
// reflection), so a worker paging millions of tokens reuses one buffer.
func (s *Store) AudiencePage(ctx context.Context, a Audience, after, upto uint64, limit int, dst []Target) ([]Target, error) {
	dst = dst[:0]
	if limit <= 0 {
		return dst, fmt.Errorf("audience page: limit %d must be positive", limit)
	}
	cond, args, empty, err := audienceFilter(a)
	if err != nil {
		return dst, fmt.Errorf("audience page: %w", err)
	}
	if empty || upto <= after {
		return dst, nil
	}
	// STRAIGHT_JOIN pins device_tokens as the driving table for "all", so
	// the plan is a primary-key range walk that stops after limit rows
	// instead of a join over all users followed by a sort. For user_ids the
	// optimizer is left free: there, driving from the user_id index is better.
	hint := ""
	if a.All {
		hint = "STRAIGHT_JOIN "
	}
	q := s.db.Rebind("SELECT " + hint + "t.id, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.id > ? AND t.id <= ? AND " +
		cond + " ORDER BY t.id LIMIT ?")
	full := make([]any, 0, len(args)+3)
	full = append(full, after, upto)
	full = append(full, args...)
	full = append(full, limit)

	rows, err := s.db.QueryContext(ctx, q, full...)
	if err != nil {
		return dst, fmt.Errorf("audience page after %d: %w", after, err)
	}
	defer rows.Close()
	for rows.Next() {
		dst = append(dst, Target{})
		t := &dst[len(dst)-1]
		if err := rows.Scan(&t.TokenID, &t.UserID, &t.Token); err != nil {
			return dst[:0], fmt.Errorf("audience page: scan: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return dst[:0], fmt.Errorf("audience page after %d: %w", after, err)
	}
	return dst, nil
}

// CountAudience returns how many targets AudiencePage would yield in total
// right now (the broadcast's "targeted" before sending starts).
func (s *Store) CountAudience(ctx context.Context, a Audience) (int64, error) {
	cond, args, empty, err := audienceFilter(a)
	if err != nil {
		return 0, fmt.Errorf("count audience: %w", err)
	}
	if empty {
		return 0, nil
	}
	var n int64
	q := s.db.Rebind("SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE " + cond)
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count audience: %w", err)
	}
	return n, nil
}
