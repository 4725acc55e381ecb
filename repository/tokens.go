package repository

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"

	"github.com/jmoiron/sqlx"
)

// Invalidation marks one token dead, with why (e.g. the FCM error code).
type Invalidation struct {
	TokenID uint64
	Token   string // used when TokenID is 0 (a named audience that does not return ids)
	Reason  string
}

// invalidateChunk bounds the IN list of one UPDATE: small enough to keep each
// statement's row locks short-lived, large enough to need few round trips,
// and below MariaDB's in_predicate_conversion_threshold (1000), past which
// the list becomes a derived table that an UPDATE reads by a full scan.
const invalidateChunk = 500

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
	if s.schema.mapped {
		return s.schema.writeBack(ctx, s.db, items)
	}
	return invalidateTokens(ctx, s.db, items, at)
}

// execer is what invalidateTokens needs: the pool, or a transaction (chunk
// checkpoints invalidate in the same transaction as their counters).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func invalidateTokens(ctx context.Context, db execer, items []Invalidation, at time.Time) (int64, error) {
	if len(items) == 0 {
		return 0, nil
	}
	byID := make(map[string][]uint64)
	byToken := make(map[string][]string) // named audiences may not return token ids
	for _, it := range items {
		r := sqldb.ClampRunes(it.Reason, maxReasonRunes)
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

// Target is one device token to send to.
type Target struct {
	TokenID uint64 `db:"id"`
	UserID  uint64 `db:"user_id"`
	Token   string `db:"token"`
	Locale  string `db:"locale"` // users.locale, for localized messages
	// Platform is the token's platform as sends are counted under it
	// (model.PlatformOf: android, ios, web or other).
	Platform string `db:"-"`
}

// errAmbiguousAudience guards against the costly mistake of treating
// {"all":true,"user_ids":[...]} as "all".
var errAmbiguousAudience = errors.New("audience sets both all and user_ids")

// audienceFilter returns the WHERE conditions (on device_tokens t joined to
// users u) for a, with their arguments. empty is true when a selects nobody,
// so callers can skip the query.
//
// The audience rule (docs/api.md, "POST /push/broadcast"): one target per valid token
// (invalidated_at IS NULL) of each user with push_enabled = 1 in the audience.
// Tokens whose user row is missing are not targeted (the inner join).
func audienceFilter(sc *Schema, a model.Audience) (cond string, args []any, empty bool, err error) {
	base := sc.base
	if a.Zones != nil {
		// A local-time chunk planned before migration 00014 reads its zone
		// group only (localtime.go); later ones carry their target list.
		zc, zargs := sc.zoneCondition(*a.Zones)
		rest := a
		rest.Zones = nil
		if cond, args, empty, err = audienceFilter(sc, rest); err != nil || empty {
			return cond, args, empty, err
		}
		return "(" + cond + ") AND " + zc, append(args, zargs...), false, nil
	}
	switch {
	case a.Name != "":
		return "", nil, false, fmt.Errorf("named audience %q is paged by package audience, not by SQL here", a.Name)
	case a.All && len(a.UserIDs) > 0, a.ResendOf != 0 && (a.All || len(a.UserIDs) > 0),
		a.Segment != nil && (a.All || len(a.UserIDs) > 0 || a.ResendOf != 0):
		return "", nil, false, errAmbiguousAudience
	case a.Segment != nil:
		return segmentFilter(sc, *a.Segment)
	case a.ResendOf != 0:
		return resendFilter(sc, a)
	case a.All:
		return base, nil, false, nil
	case len(a.UserIDs) == 0:
		return "", nil, true, nil
	}
	// sqlx.In expands the slice into one placeholder per id. With Open's
	// interpolateParams there is no placeholder cap, but the list is resent
	// with every page: user_ids audiences are meant for thousands of users,
	// not millions (use All or an operator table for those).
	cond, args, err = sqlx.In(base+" AND "+sc.tUser+" IN (?)", a.UserIDs)
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
func (s *Store) AudiencePage(ctx context.Context, a model.Audience, after, upto uint64, limit int, dst []Target) ([]Target, error) {
	dst, _, err := s.AudiencePageStale(ctx, a, after, upto, limit, dst)
	return dst, err
}

// AudiencePageStale is AudiencePage, also returning how many stale tokens
// (PUSHFAN_STALE_AFTER) it passed over: a send counts what the stale rule
// leaves out. The page reads the stale tokens flagged rather than
// filtered (the same rows read either way: the walk's index does not hold
// last_seen), keeps the fresh ones, and reads on while stale ones left it
// short, so that only the last page is short, as the engine expects. A
// stale token is counted once: the rows past the one that filled the page
// are read again by the next page, and counted then.
func (s *Store) AudiencePageStale(ctx context.Context, a model.Audience, after, upto uint64, limit int, dst []Target) ([]Target, int, error) {
	return s.AudiencePageStaleIDs(ctx, a, after, upto, limit, dst, nil)
}

// AudiencePageStaleIDs is AudiencePageStale, also calling stale (when
// not nil) with the id of each stale token it counts: a send keeps them
// as outcome stale (package lease/outcome).
func (s *Store) AudiencePageStaleIDs(ctx context.Context, a model.Audience, after, upto uint64, limit int, dst []Target, staleID func(uint64)) ([]Target, int, error) {
	dst = dst[:0]
	if s.schema.flagged == nil {
		dst, err := s.audiencePage(ctx, a, after, upto, limit, dst)
		return dst, 0, err
	}
	flagged := s.WithSchema(s.schema.flagged)
	flagged.walk = s.walk
	stale := 0
	for {
		q, args, empty, err := flagged.audiencePageQuery(ctx, a, after, upto, limit)
		if err != nil || empty {
			return dst, stale, err
		}
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return dst[:0], 0, fmt.Errorf("audience page after %d: %w", after, err)
		}
		var read, skipped int
		var last uint64
		if dst, read, skipped, last, err = scanFlagged(rows, dst, limit, staleID); err != nil {
			return dst[:0], 0, fmt.Errorf("audience page after %d: %w", after, err)
		}
		stale += skipped
		after = last
		if len(dst) == limit || read < limit {
			return dst, stale, nil
		}
	}
}

// audiencePage is AudiencePage without the stale rule's flags.
func (s *Store) audiencePage(ctx context.Context, a model.Audience, after, upto uint64, limit int, dst []Target) ([]Target, error) {
	q, args, empty, err := s.audiencePageQuery(ctx, a, after, upto, limit)
	if err != nil {
		return dst, err
	}
	if empty {
		return dst, nil
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return dst, fmt.Errorf("audience page after %d: %w", after, err)
	}
	if dst, err = scanTargets(rows, dst); err != nil {
		return dst, fmt.Errorf("audience page after %d: %w", after, err)
	}
	return dst, nil
}

// audiencePageQuery is AudiencePage's statement and its arguments; empty
// when the page has no target without reading anything.
func (s *Store) audiencePageQuery(ctx context.Context, a model.Audience, after, upto uint64, limit int) (q string, args []any, empty bool, err error) {
	if limit <= 0 {
		return "", nil, false, fmt.Errorf("audience page: limit %d must be positive", limit)
	}
	cond, cargs, empty, err := audienceFilter(s.schema, a)
	if err != nil {
		return "", nil, false, fmt.Errorf("audience page: %w", err)
	}
	if empty || upto <= after {
		return "", nil, true, nil
	}
	// STRAIGHT_JOIN pins device_tokens as the driving table for "all", so
	// the plan is a range walk of the tokens that stops after limit rows
	// instead of a join over all users followed by a sort: the primary
	// key's, or for a small app of the shared table its own range of the
	// app index (walkFrom). For user_ids the optimizer is left free:
	// there, driving from the user_id index is better.
	sc := s.schema
	hint, from := "", sc.from
	if a.All || a.Segment != nil {
		hint, from = "STRAIGHT_JOIN ", s.walkFrom(ctx)
	}
	// u.locale costs the plan nothing: the users row is read by its
	// primary key for push_enabled already.
	args = make([]any, 0, len(cargs)+3)
	args = append(args, after, upto)
	args = append(args, cargs...)
	args = append(args, limit)
	return s.db.Rebind("SELECT " + hint + sc.pageCols + from + sc.pageRange + cond + sc.pageTail), args, false, nil
}

// CountAudienceStale is CountAudience and, beside it, how many tokens the
// audience would have but for the stale rule (0 while it is off): one
// scan counts both.
func (s *Store) CountAudienceStale(ctx context.Context, a model.Audience) (count, stale int64, err error) {
	count, stale, _, err = s.CountAudienceExcluded(ctx, a)
	return count, stale, err
}

// CountAudienceExcluded is CountAudienceStale and, beside them, how many
// tokens of fresh users the category's consent leaves out (0 without a
// consent rule, WithCategory): one scan counts all three, as a plan does.
func (s *Store) CountAudienceExcluded(ctx context.Context, a model.Audience) (count, stale, noConsent int64, err error) {
	open := s.schema.Open()
	if open.flagged == nil && !s.schema.ConsentRule() {
		count, err = s.CountAudience(ctx, a)
		return count, 0, 0, err
	}
	sc, staleExpr, consentExpr := open, "0", "0"
	if open.flagged != nil {
		sc, staleExpr = open.flagged, open.staleValue
	}
	if s.schema.ConsentRule() {
		consentExpr = "((" + s.schema.consent.state + ") & 1 = 0)"
	}
	cond, args, empty, err := audienceFilter(sc, a)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count audience: %w", err)
	}
	if empty {
		return 0, 0, 0, nil
	}
	var all int64
	var st, nc sql.NullInt64
	q := s.db.Rebind("SELECT COUNT(*), SUM(" + staleExpr + "), SUM(NOT " + staleExpr + " AND " + consentExpr + ") FROM " + sc.from + " WHERE " + cond)
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&all, &st, &nc); err != nil {
		return 0, 0, 0, fmt.Errorf("count audience: %w", err)
	}
	return all - st.Int64 - nc.Int64, st.Int64, nc.Int64, nil
}

// Snapshot is a read-only transaction whose snapshot was taken when it
// was opened (SnapshotTx), on a connection of its own.
type Snapshot struct {
	Tx   *sql.Tx
	conn *sql.Conn
	end  context.CancelFunc
}

// Close ends the snapshot and gives its connection back.
func (sn *Snapshot) Close() {
	_ = sn.Tx.Rollback()
	_ = sn.conn.Close()
	sn.end()
}

// SnapshotTx opens a Snapshot taken now, before it answers (InnoDB fixes
// a REPEATABLE READ snapshot at its first read, here the tokens' highest
// id): what it reads later is the tokens as they were now. A plan's count
// of its users reads through one taken before the plan's first step, so
// that the tokens its sends mark dead meanwhile are counted as the plan
// counted them. ctx bounds its life; open bounds the wait for a
// connection and the first read. The caller closes it.
func (s *Store) SnapshotTx(ctx, open context.Context) (*Snapshot, error) {
	conn, err := s.db.Conn(open)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// The transaction lives with ctx (database/sql rolls it back when its
	// context ends), yet BEGIN waits no longer than open allows: a stuck
	// server does not hold the plan's start past open.
	life, end := context.WithCancel(ctx)
	bounded := context.AfterFunc(open, end)
	tx, err := conn.BeginTx(life, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	bounded()
	if err != nil {
		end()
		_ = conn.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	sn := &Snapshot{Tx: tx, conn: conn, end: end}
	if _, err := s.MaxTokenID(open, tx); err != nil {
		sn.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return sn, nil
}

// CountAudience returns how many targets AudiencePage would yield in total
// right now (the broadcast's "targeted" before sending starts).
func (s *Store) CountAudience(ctx context.Context, a model.Audience) (int64, error) {
	cond, args, empty, err := audienceFilter(s.schema, a)
	if err != nil {
		return 0, fmt.Errorf("count audience: %w", err)
	}
	if empty {
		return 0, nil
	}
	var n int64
	q := s.db.Rebind("SELECT COUNT(*) FROM " + s.schema.from + " WHERE " + cond)
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count audience: %w", err)
	}
	return n, nil
}

// scanTargets appends the targets rows holds (token id, user id, token,
// locale, platform: the schema's targetColumns) to dst and closes rows; on
// an error it returns dst emptied.
func scanTargets(rows *sql.Rows, dst []Target) ([]Target, error) {
	defer rows.Close()
	var locale, platform sql.RawBytes
	var locales localeInterner
	for rows.Next() {
		dst = append(dst, Target{})
		t := &dst[len(dst)-1]
		if err := rows.Scan(&t.TokenID, &t.UserID, &t.Token, &locale, &platform); err != nil {
			return dst[:0], fmt.Errorf("scan target: %w", err)
		}
		t.Locale, t.Platform = locales.intern(locale), model.PlatformOf(platform)
	}
	if err := rows.Err(); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// scanFlagged appends to dst the fresh targets of rows (targetColumns and
// the stale flag), up to limit in all, and closes rows. It returns how
// many rows it read, how many of those were stale (each one's id to
// staleID, if not nil), and the id of the last
// row it took in (after, when none): the rows past the one that filled
// dst are left for the next page.
func scanFlagged(rows *sql.Rows, dst []Target, limit int, staleID func(uint64)) (out []Target, read, stale int, last uint64, err error) {
	defer rows.Close()
	var locale, platform sql.RawBytes
	var locales localeInterner
	var t Target
	var isStale bool
	for len(dst) < limit && rows.Next() {
		if err := rows.Scan(&t.TokenID, &t.UserID, &t.Token, &locale, &platform, &isStale); err != nil {
			return dst[:0], 0, 0, 0, fmt.Errorf("scan target: %w", err)
		}
		read++
		last = t.TokenID
		if isStale {
			stale++
			if staleID != nil {
				staleID(t.TokenID)
			}
			continue
		}
		t.Locale, t.Platform = locales.intern(locale), model.PlatformOf(platform)
		dst = append(dst, t)
	}
	if err := rows.Err(); err != nil {
		return dst[:0], 0, 0, 0, err
	}
	return dst, read, stale, last, nil
}
