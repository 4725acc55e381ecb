package repository

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"pushfan/model"
)

// Counting a segment (docs/segments.md, "Counting"): exactly, one scan of
// the audience with the segment's filter; or, on a table too big to scan
// while the operator types, an estimate from a fixed sample.
//
// The estimate reads the users of EstimateRanges evenly spread ranges of
// EstimateRangeIDs ids each of the users' primary key, between its MIN and
// MAX (100,000 user ids whatever the table's size), with all their tokens
// (the tokens' user_id index), under the audience rule and the filter, and
// scales what it counts by the id span over the ids read. Sampling users,
// not tokens, keeps both counts unbiased: a sampled user comes with every
// token of theirs, so a user with three tokens is counted once, not three
// times in three ranges.
//
// How close it is: each user id read is a draw; with n = 100,000 draws of
// a proportion p the standard error is sqrt(p(1-p)/n) ≤ 0.16 % of the id
// span, so the users' count is within ±0.3 % of the users table (95 %),
// and the tokens' within about that times the tokens per user. The ranges
// are spread evenly over the ids (one in the middle of each twentieth), so
// a filter that follows the ids' age (newer users on newer app versions)
// is sampled in step with it; one that picks whole runs of ids (users
// imported in batches of one kind) is as close as its runs are short
// next to 5,000 ids. Gaps in the ids (deleted users) count as users who
// do not match: the scale is the span, not the rows. Ids too sparse for
// that (an app's own, made up rather than counted up) are sampled
// through the tokens' ids instead (estimateByTokens).

// The estimate's sample: EstimateRanges ranges of EstimateRangeIDs user ids.
const (
	EstimateRanges   = 20
	EstimateRangeIDs = 5000
)

// CountSegment counts the targets of the segment ref now, exactly, under
// the audience rule: its tokens and its distinct users in one statement,
// and up to sample of those users' ids (none for sample ≤ 0).
func (s *Store) CountSegment(ctx context.Context, ref model.SegmentRef, sample int) (tokens, users int64, sampleUserIDs []uint64, err error) {
	sc := s.schema
	cond, args, _, err := audienceFilter(sc, model.Audience{Segment: &ref})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("count segment: %w", err)
	}
	q := "SELECT COUNT(*), COUNT(DISTINCT " + sc.tUser + ") FROM " + sc.from + " WHERE " + cond
	if err := s.db.QueryRowContext(ctx, s.db.Rebind(q), args...).Scan(&tokens, &users); err != nil {
		return 0, 0, nil, fmt.Errorf("count segment: %w", err)
	}
	if sample <= 0 || users == 0 {
		return tokens, users, []uint64{}, nil
	}
	ids, err := s.sampleUsers(ctx, sc.from, cond, args, sample)
	return tokens, users, ids, err
}

// EstimateSegment estimates the targets of the segment ref from a sample
// of the users (see above), in a time that does not grow with the
// tables: its tokens, its distinct users, and up to sample of the users
// it read. A users table of at most EstimateRanges × EstimateRangeIDs ids
// is read whole: the count is exact. Users whose ids are sparse (fewer
// than one id in minUserDensity of the ranges is a user: ids an app made
// up, not counted up) are sampled through their tokens instead
// (estimateByTokens).
func (s *Store) EstimateSegment(ctx context.Context, ref model.SegmentRef, sample int) (tokens, users int64, sampleUserIDs []uint64, err error) {
	sc := s.schema
	cond, args, _, err := audienceFilter(sc, model.Audience{Segment: &ref})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("estimate segment: %w", err)
	}
	sp, ok, err := s.sampleSpace(ctx)
	if err != nil || !ok {
		return 0, 0, []uint64{}, err
	}
	if sp.byTokens {
		return s.estimateByTokens(ctx, cond, args, sample)
	}
	from, where := sp.from, "("+sp.cond+") AND "+cond
	wargs := append(sp.args, args...)
	read, span := sp.read, sp.span
	var n, nUsers int64
	q := "SELECT COUNT(*), COUNT(DISTINCT " + sc.tUser + ") FROM " + from + " WHERE " + where
	if err := s.db.QueryRowContext(ctx, s.db.Rebind(q), wargs...).Scan(&n, &nUsers); err != nil {
		return 0, 0, nil, fmt.Errorf("estimate segment: %w", err)
	}
	scale := float64(span) / float64(read)
	tokens, users = int64(math.Round(float64(n)*scale)), int64(math.Round(float64(nUsers)*scale))
	if sample <= 0 || nUsers == 0 {
		return tokens, users, []uint64{}, nil
	}
	ids, err := s.sampleUsers(ctx, from, where, wargs, sample)
	return tokens, users, ids, err
}

// sampleSpace is where a bounded read of the targets reads: from, its
// join (hint makes the tokens drive it), and cond over the sampled ids
// with its args; read is how many ids the ranges hold and span how many
// the table's span does (read == span: the whole table).
type sampleSpace struct {
	hint, from, cond string
	args             []any
	read, span       int64
	// byTokens: the ranges are of the tokens' ids (the users' are sparse).
	byTokens bool
}

// sampleSpace chooses the ranges EstimateSegment reads: of the users'
// ids, or of the tokens' when the users' are sparse (fewer than one id in
// minUserDensity of the ranges is a user). ok is false for no users.
func (s *Store) sampleSpace(ctx context.Context) (sampleSpace, bool, error) {
	sc := s.schema
	lo, hi, ok, err := s.idSpan(ctx, sc.uID, sc.usersTable+" u")
	if err != nil || !ok {
		return sampleSpace{}, false, err
	}
	ranges, read, span := estimateRanges(lo, hi)
	if len(ranges) > 1 {
		var present int64
		q := "SELECT COUNT(*) FROM " + sc.usersTable + " u WHERE " + ranges.cond(sc.uID)
		if err := s.db.QueryRowContext(ctx, q, ranges.args()...).Scan(&present); err != nil {
			return sampleSpace{}, false, fmt.Errorf("sample: users in the ranges: %w", err)
		}
		if present*minUserDensity < read {
			lo, hi, ok, err := s.idSpan(ctx, sc.tID, sc.tokensTable+" t")
			if err != nil || !ok {
				return sampleSpace{}, false, err
			}
			ranges, read, span := estimateRanges(lo, hi)
			return sampleSpace{hint: "STRAIGHT_JOIN ", from: sc.from, cond: ranges.cond(sc.tID), args: ranges.args(), read: read, span: span, byTokens: true}, true, nil
		}
	}
	// users drive (STRAIGHT_JOIN): a range scan of their primary key,
	// then each one's tokens by the tokens' user_id index.
	from := sc.usersTable + " u STRAIGHT_JOIN " + sc.tokensTable + " t ON " + sc.tUser + " = " + sc.uID
	return sampleSpace{from: from, cond: ranges.cond(sc.uID), args: ranges.args(), read: read, span: span}, true, nil
}

// minUserDensity: the users' ranges are sampled when at least one id in
// minUserDensity of them is a user; sparser ids would leave the sample
// too few users to count (20 of 100,000 snowflake ids).
const minUserDensity = 5

// estimateByTokens is the estimate for users with sparse ids: the same
// ranges over the tokens' primary key (an auto-increment, dense), the
// tokens scaled by its span. Users are then the tokens times the share
// of distinct users among the sampled ones: exact when each user has one
// token, and above the truth by up to the tokens per user when a user's
// tokens fall in different ranges (each counts them once).
func (s *Store) estimateByTokens(ctx context.Context, cond string, args []any, sample int) (tokens, users int64, sampleUserIDs []uint64, err error) {
	sc := s.schema
	lo, hi, ok, err := s.idSpan(ctx, sc.tID, sc.tokensTable+" t")
	if err != nil || !ok {
		return 0, 0, []uint64{}, err
	}
	ranges, read, span := estimateRanges(lo, hi)
	where := "(" + ranges.cond(sc.tID) + ") AND " + cond
	wargs := append(ranges.args(), args...)
	var n, nUsers int64
	q := "SELECT STRAIGHT_JOIN COUNT(*), COUNT(DISTINCT " + sc.tUser + ") FROM " + sc.from + " WHERE " + where
	if err := s.db.QueryRowContext(ctx, s.db.Rebind(q), wargs...).Scan(&n, &nUsers); err != nil {
		return 0, 0, nil, fmt.Errorf("estimate segment by tokens: %w", err)
	}
	if n == 0 {
		return 0, 0, []uint64{}, nil
	}
	tokens = int64(math.Round(float64(n) * float64(span) / float64(read)))
	users = int64(math.Round(float64(tokens) * float64(nUsers) / float64(n)))
	if sample <= 0 {
		return tokens, users, []uint64{}, nil
	}
	ids, err := s.sampleUsers(ctx, sc.from, where, wargs, sample)
	return tokens, users, ids, err
}

// idSpan is the smallest and largest of the ids col in from; ok is false
// for an empty table.
func (s *Store) idSpan(ctx context.Context, col, from string) (lo, hi int64, ok bool, err error) {
	var l, h sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MIN("+col+"), MAX("+col+") FROM "+from).Scan(&l, &h); err != nil {
		return 0, 0, false, fmt.Errorf("estimate segment: the ids of %s: %w", from, err)
	}
	return l.Int64, h.Int64, l.Valid, nil
}

// sampleUsers reads up to n distinct user ids of the targets in from
// under where.
func (s *Store) sampleUsers(ctx context.Context, from, where string, args []any, n int) ([]uint64, error) {
	q := "SELECT DISTINCT " + s.schema.tUser + " FROM " + from + " WHERE " + where + " LIMIT ?"
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(q), append(args[:len(args):len(args)], n)...)
	if err != nil {
		return nil, fmt.Errorf("segment sample: %w", err)
	}
	defer rows.Close()
	ids := make([]uint64, 0, n)
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("segment sample: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("segment sample: %w", err)
	}
	return ids, nil
}

// idRanges are closed ranges of ids, [lo, hi] each.
type idRanges [][2]int64

func (r idRanges) cond(col string) string {
	parts := make([]string, len(r))
	for i := range r {
		parts[i] = col + " BETWEEN ? AND ?"
	}
	return strings.Join(parts, " OR ")
}

func (r idRanges) args() []any {
	out := make([]any, 0, 2*len(r))
	for _, x := range r {
		out = append(out, x[0], x[1])
	}
	return out
}

// estimateRanges are the ranges the estimate reads between the ids lo and
// hi: the whole span when it is no more than the sample, else one range of
// EstimateRangeIDs in the middle of each EstimateRanges-th of it; read is
// how many ids they hold, span how many lo..hi does.
func estimateRanges(lo, hi int64) (r idRanges, read, span int64) {
	span = hi - lo + 1
	if span <= EstimateRanges*EstimateRangeIDs {
		return idRanges{{lo, hi}}, span, span
	}
	r = make(idRanges, EstimateRanges)
	for i := range r {
		start := lo + span*int64(i)/EstimateRanges + (span/EstimateRanges-EstimateRangeIDs)/2
		r[i] = [2]int64{start, start + EstimateRangeIDs - 1}
	}
	return r, EstimateRanges * EstimateRangeIDs, span
}

// TokensMaxID is the tokens' largest id (0 for none): how big a count of
// the table would be, read from the end of its primary key.
func (s *Store) TokensMaxID(ctx context.Context) (uint64, error) {
	var hi sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX("+s.schema.tID+") FROM "+s.schema.tokensTable+" t").Scan(&hi); err != nil {
		return 0, fmt.Errorf("tokens' largest id: %w", err)
	}
	return uint64(max(hi.Int64, 0)), nil
}
