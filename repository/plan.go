package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"

	"github.com/jmoiron/sqlx"
)

// PlanRow is one target as a plan reads it: its token id, its user and,
// for a plan that needs it (local time, quiet hours), its user's zone
// column.
type PlanRow struct {
	ID      uint64
	Zone    string
	HasZone bool // false: the column is NULL (the default zone applies)
	// Consent is the user's consent to the broadcast's category,
	// ConsentDay | ConsentNight (both when the category asks for none): a
	// plan leaves out the targets without ConsentDay and counts them, and
	// defers those without ConsentNight inside the night window.
	Consent uint8
	// UserID is the target's user: a plan made inside its submit, and a
	// named audience's walk, count the users (package plan, users.go).
	UserID uint64
}

// MaxTokenID is the highest token id now (0 for none): the snapshot a
// broadcast's plan reads up to, so that tokens registered after the plan
// started are not part of it. q is a transaction, or nil for the pool.
func (s *Store) MaxTokenID(ctx context.Context, q sqldb.Querier) (uint64, error) {
	if q == nil {
		q = s.db
	}
	var hi sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT MAX("+s.schema.tID+") FROM "+s.schema.tokensTable+" t").Scan(&hi); err != nil {
		return 0, fmt.Errorf("audience snapshot: %w", err)
	}
	return uint64(hi.Int64), nil
}

// PlanPage appends to dst[:0] up to limit targets of the built-in audience
// a whose token id is in (after, upto], in id order, with their zones when
// withZone. A plan reads the audience with it once, in order, page after
// page from where the last one ended: one scan of the primary key for
// "all", whatever the number of zones. q is the transaction that stores a
// plan made at once (a user_ids audience), or nil for the pool.
func (s *Store) PlanPage(ctx context.Context, q sqldb.Querier, a model.Audience, after, upto uint64, limit int, withZone bool, dst []PlanRow) ([]PlanRow, error) {
	dst = dst[:0]
	if q == nil {
		q = s.db
	}
	if limit <= 0 {
		return dst, fmt.Errorf("plan page: limit %d must be positive", limit)
	}
	// A category's plan reads the targets without consent too, flagged,
	// to count them: one pass, the same rows a plain plan reads but for
	// them.
	consent := strconv.Itoa(ConsentDay | ConsentNight)
	if st := s.schema.consent.state; st != "" {
		consent = st
	}
	sc := s.schema.Open()
	zone := "NULL"
	if withZone {
		zone = sc.uTimezone
	}
	zone = sc.tUser + ", " + zone + ", " + consent
	var query string
	var full []any
	if a.ResendOf != 0 {
		// A resend reads its original's failures in token order, by their
		// (broadcast_id, token_id) index, and keeps the still-valid ones:
		// one pass over the failures, never one over the tokens.
		if len(a.Codes) == 0 || upto <= after {
			return dst, nil
		}
		var err error
		query, full, err = sqlx.In("SELECT STRAIGHT_JOIN f.token_id, "+zone+
			" FROM broadcast_failures f FORCE INDEX (idx_broadcast_failures_token) JOIN "+sc.tokensTable+" t ON "+sc.tID+" = f.token_id"+
			" JOIN "+sc.usersTable+" u ON "+sc.uID+" = "+sc.tUser+
			" WHERE f.broadcast_id = ? AND f.token_id > ? AND f.token_id <= ? AND f.code IN (?) AND "+sc.base+
			" ORDER BY f.token_id LIMIT ?", a.ResendOf, after, upto, a.Codes, limit)
		if err != nil {
			return dst, fmt.Errorf("plan page: expand resend codes: %w", err)
		}
	} else {
		cond, args, empty, err := audienceFilter(sc, a)
		if err != nil {
			return dst, fmt.Errorf("plan page: %w", err)
		}
		if empty || upto <= after {
			return dst, nil
		}
		hint, from := "", sc.from
		if a.All || a.Segment != nil {
			hint, from = "STRAIGHT_JOIN ", s.walkFrom(ctx) // a range walk that stops after limit rows (see AudiencePage)
		}
		full = make([]any, 0, len(args)+3)
		full = append(full, after, upto)
		full = append(full, args...)
		full = append(full, limit)
		query = "SELECT " + hint + sc.tID + ", " + zone + " FROM " + from + " WHERE " + sc.tID + " > ? AND " + sc.tID + " <= ? AND " + cond +
			" ORDER BY " + sc.tID + " LIMIT ?"
	}
	rows, err := q.QueryContext(ctx, query, full...)
	if err != nil {
		return dst, fmt.Errorf("plan page after %d: %w", after, err)
	}
	defer rows.Close()
	var raw sql.RawBytes
	zones := map[string]string{} // one string per zone name, not per row
	for rows.Next() {
		var r PlanRow
		if err := rows.Scan(&r.ID, &r.UserID, &raw, &r.Consent); err != nil {
			return dst[:0], fmt.Errorf("plan page: scan: %w", err)
		}
		if raw != nil {
			r.HasZone = true
			z, ok := zones[string(raw)]
			if !ok {
				z = string(raw)
				zones[z] = z
			}
			r.Zone = z
		}
		dst = append(dst, r)
	}
	if err := rows.Err(); err != nil {
		return dst[:0], fmt.Errorf("plan page after %d: %w", after, err)
	}
	return dst, nil
}

// MaxIDsPerRead is how many ids TargetsByID reads in one statement.
// MariaDB turns an IN list of in_predicate_conversion_threshold (1000)
// values or more into a join with a derived table, which it may read by a
// scan of the whole index: below it, the list is as many primary-key
// lookups. The statement also bounds the ids by their first and last, so
// a lower threshold set by an operator costs a range of the chunk, never
// the table.
const MaxIDsPerRead = 500

// TargetsByID appends to dst[:0] the targets among ids (ascending token
// ids a plan fixed for a chunk, at most MaxIDsPerRead) that are still
// valid, with push still enabled for their users, in id order: a chunk
// with a target list pages it with this, and a token invalidated or a
// user disabled since the plan is not sent to.
func (s *Store) TargetsByID(ctx context.Context, ids []uint64, dst []Target) ([]Target, error) {
	dst, _, err := s.TargetsByIDStale(ctx, ids, dst)
	return dst, err
}

// TargetsByIDStale is TargetsByID, also returning how many of ids it left
// out as stale (PUSHFAN_STALE_AFTER): the plan counted them fresh, and a
// send counts what it leaves out.
func (s *Store) TargetsByIDStale(ctx context.Context, ids []uint64, dst []Target) ([]Target, int, error) {
	return s.TargetsByIDStaleIDs(ctx, ids, dst, nil)
}

// TargetsByIDStaleIDs is TargetsByIDStale, also calling staleID (when not
// nil) with the id of each stale token it leaves out.
func (s *Store) TargetsByIDStaleIDs(ctx context.Context, ids []uint64, dst []Target, staleID func(uint64)) ([]Target, int, error) {
	dst = dst[:0]
	if len(ids) == 0 {
		return dst, 0, nil
	}
	if len(ids) > MaxIDsPerRead {
		return dst, 0, fmt.Errorf("targets by id: %d ids, at most %d a read", len(ids), MaxIDsPerRead)
	}
	var in strings.Builder
	in.Grow(len(ids) * 9)
	for i, id := range ids {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteString(strconv.FormatUint(id, 10)) // integers the plan stored, never request text
	}
	sc := s.schema
	if f := sc.flagged; f != nil {
		rows, err := s.db.QueryContext(ctx, "SELECT STRAIGHT_JOIN "+f.pageCols+f.from+" WHERE "+sc.tID+" BETWEEN ? AND ? AND "+
			sc.tID+" IN ("+in.String()+") AND "+f.base+" ORDER BY "+sc.tID, ids[0], ids[len(ids)-1])
		if err != nil {
			return dst, 0, fmt.Errorf("targets by id from %d: %w", ids[0], err)
		}
		dst, _, stale, _, err := scanFlagged(rows, dst, len(ids), staleID)
		if err != nil {
			return dst, 0, fmt.Errorf("targets by id from %d: %w", ids[0], err)
		}
		return dst, stale, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT STRAIGHT_JOIN "+sc.targetColumns()+" FROM "+sc.from+" WHERE "+sc.tID+" BETWEEN ? AND ? AND "+
		sc.tID+" IN ("+in.String()+") AND "+sc.base+" ORDER BY "+sc.tID, ids[0], ids[len(ids)-1])
	if err != nil {
		return dst, 0, fmt.Errorf("targets by id from %d: %w", ids[0], err)
	}
	if dst, err = scanTargets(rows, dst); err != nil {
		return dst, 0, fmt.Errorf("targets by id from %d: %w", ids[0], err)
	}
	return dst, 0, nil
}
