package audience

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

// PreviewPageSize is the keyset page size Preview walks the audience with.
const PreviewPageSize = 1000

// Row is one target of a named audience: a device token plus the extra
// columns of its row.
type Row struct {
	Cursor uint64
	UserID uint64
	Token  string
	// Zone is the user's IANA zone from the query's timezone column, when
	// it returns one that is neither NULL nor empty (HasZone).
	Zone    string
	HasZone bool
	// Vars holds the extra columns as strings (NULL is ""), nil when the
	// audience has none. Each row gets its own map, never reused by a later
	// Page, so a Row may be handed to another goroutine.
	Vars map[string]string
}

// Page appends to dst[:0] the rows with cursor > after, at most limit, in
// cursor order, and returns the slice (dst's backing array is reused). Call
// it again with the last row's Cursor as after until it returns fewer than
// limit rows.
//
// It returns an error (and dst[:0]) when the query breaks the keyset
// contract: a cursor not greater than after or than the row before it (the
// query must filter on cursor > :after and ORDER BY cursor), more than limit
// rows, a missing required column, a NULL, negative or non-integer cursor
// or user_id, a NULL or empty token, or a token_id column (ColTokenID) whose
// value differs from the row's cursor.
func (b Bound) Page(ctx context.Context, db *sqlx.DB, after uint64, limit int, dst []Row) ([]Row, error) {
	return b.page(ctx, db, after, math.MaxUint64, limit, dst, true)
}

// PageRange is Page for the cursors in (after, upto], a chunk's range. A
// query that uses :upto stops there itself; for one that does not, the
// rows beyond upto are dropped here (the chunk's last page is short, and
// the next chunk reads them).
func (b Bound) PageRange(ctx context.Context, db *sqlx.DB, after, upto uint64, limit int, dst []Row) ([]Row, error) {
	rows, err := b.page(ctx, db, after, upto, limit, dst, true)
	if err != nil {
		return rows, err
	}
	for i, r := range rows {
		if r.Cursor > upto {
			return rows[:i], nil
		}
	}
	return rows, nil
}

// Cursors appends to dst[:0] the cursors of up to limit rows after
// `after`, in cursor order: what a broadcast's plan reads of the audience
// to cut it into chunks of a known size. Pages are read as Page reads them
// (the same keyset contract and checks), without their variables.
func (b Bound) Cursors(ctx context.Context, db *sqlx.DB, after uint64, limit int, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	rows, err := b.page(ctx, db, after, math.MaxUint64, limit, nil, false)
	if err != nil {
		return dst, err
	}
	for _, r := range rows {
		dst = append(dst, r.Cursor)
	}
	return dst, nil
}

// Targets appends to dst[:0] the rows of up to limit targets after
// `after`, in cursor order, without their variables: what a local-time
// plan reads of the audience (cursor, user and the timezone column, if
// the query returns one). The same keyset contract and checks as Page.
func (b Bound) Targets(ctx context.Context, db *sqlx.DB, after uint64, limit int, dst []Row) ([]Row, error) {
	return b.page(ctx, db, after, math.MaxUint64, limit, dst, false)
}

// page is Page; withVars false leaves Vars nil (Preview needs no variables).
func (b Bound) page(ctx context.Context, db *sqlx.DB, after, upto uint64, limit int, dst []Row, withVars bool) ([]Row, error) {
	dst = dst[:0]
	a := b.a
	if a == nil {
		return dst, errors.New("audience: Page on an unbound audience (use Bind)")
	}
	if limit <= 0 {
		return dst, fmt.Errorf("audience %q: page limit %d must be positive", a.name, limit)
	}
	rows, err := db.QueryContext(ctx, a.query, a.args(b.values, after, upto, limit)...)
	if err != nil {
		return dst, fmt.Errorf("audience %q: page after %d: %w", a.name, after, err)
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return dst, fmt.Errorf("audience %q: page after %d: columns: %w", a.name, after, err)
	}
	l, err := newLayout(cols)
	if err != nil {
		return dst, nameEach(a.name, err)
	}

	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	prev := after
	for rows.Next() {
		if len(dst) == limit {
			return dst[:0], fmt.Errorf("audience %q: page after %d returned more than %d rows: the sql must end in LIMIT :limit", a.name, after, limit)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return dst[:0], fmt.Errorf("audience %q: page after %d: scan: %w", a.name, after, err)
		}
		r, err := makeRow(l, vals, withVars)
		if err != nil {
			return dst[:0], fmt.Errorf("audience %q: page after %d, row %d: %w", a.name, after, len(dst)+1, err)
		}
		if r.Cursor <= prev {
			return dst[:0], fmt.Errorf("audience %q: page after %d: cursor %d follows %d: cursors must be strictly increasing "+
				"(the sql must filter on cursor > :after and ORDER BY the cursor column, which must be unique)", a.name, after, r.Cursor, prev)
		}
		prev = r.Cursor
		dst = append(dst, r)
	}
	if err := rows.Err(); err != nil {
		return dst[:0], fmt.Errorf("audience %q: page after %d: %w", a.name, after, err)
	}
	return dst, nil
}

// makeRow converts one scanned result row.
func makeRow(l layout, vals []any, withVars bool) (Row, error) {
	var r Row
	var err error
	if r.Cursor, err = toUint(vals[l.cursor]); err != nil {
		return Row{}, fmt.Errorf("cursor: %w", err)
	}
	if r.UserID, err = toUint(vals[l.userID]); err != nil {
		return Row{}, fmt.Errorf("user_id: %w", err)
	}
	switch t := vals[l.token].(type) {
	case []byte:
		r.Token = string(t)
	case string:
		r.Token = t
	case nil:
		return Row{}, fmt.Errorf("token is NULL (cursor %d)", r.Cursor)
	default:
		return Row{}, fmt.Errorf("token is a %T, want a string (cursor %d)", t, r.Cursor)
	}
	if r.Token == "" {
		return Row{}, fmt.Errorf("token is empty (cursor %d)", r.Cursor)
	}
	if l.tokenID >= 0 {
		// The query says its cursor is the token id: a row that differs
		// would have its outcome kept under another token (ColTokenID).
		id, err := toUint(vals[l.tokenID])
		if err != nil {
			return Row{}, fmt.Errorf("token_id: %w (cursor %d)", err, r.Cursor)
		}
		if id != r.Cursor {
			return Row{}, fmt.Errorf("token_id %d differs from cursor %d: a query that returns token_id says its cursor is the app's token id, "+
				"so every row's token_id must equal its cursor (return t.id AS `cursor`, t.id AS token_id, or leave token_id out)", id, r.Cursor)
		}
	}
	if l.timezone >= 0 {
		if z := format(vals[l.timezone], ""); z != "" {
			r.Zone, r.HasZone = z, true
		}
	}
	if withVars && len(l.vars) > 0 {
		r.Vars = make(map[string]string, len(l.vars))
		for _, v := range l.vars {
			r.Vars[v.name] = format(vals[v.index], v.dbType)
		}
	}
	return r, nil
}

// toUint converts a driver value (text protocol: []byte; binary: int64 or
// uint64) to an unsigned integer.
func toUint(v any) (uint64, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("%d is negative, want an unsigned integer", v)
		}
		return uint64(v), nil
	case uint64:
		return v, nil
	case []byte:
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an unsigned integer", v)
		}
		return n, nil
	case string:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an unsigned integer", v)
		}
		return n, nil
	case nil:
		return 0, errors.New("is NULL, want an unsigned integer")
	}
	return 0, fmt.Errorf("is a %T, want an unsigned integer", v)
}

// format renders a driver value as a template variable: NULL as "", numbers
// and text as MySQL prints them, DATE as YYYY-MM-DD and DATETIME/TIMESTAMP
// as "YYYY-MM-DD hh:mm:ss[.ffffff]" (the driver's parseTime turns them into
// time.Time; they are printed in the location the driver parsed them in).
func format(v any, dbType string) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(v)
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Time:
		switch dbType {
		case "DATE":
			return v.Format("2006-01-02")
		case "DATETIME", "TIMESTAMP":
			return v.Format("2006-01-02 15:04:05.999999")
		}
		return v.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// Preview walks the whole audience in keyset pages of PreviewPageSize, as a
// broadcast would, counting its rows and collecting the first n distinct
// user ids (in cursor order). It sends nothing. sampleUserIDs is never nil.
func (b Bound) Preview(ctx context.Context, db *sqlx.DB, n int) (count int64, sampleUserIDs []uint64, err error) {
	return b.PreviewEach(ctx, db, n, nil)
}

// PreviewEach is Preview calling each, if set, with the user ids of every
// page it reads (in cursor order, a user listed once per target): what a
// caller counts along the same walk (the users a frequency cap would
// withhold) costs no second pass over the audience. An error from each
// ends the walk.
func (b Bound) PreviewEach(ctx context.Context, db *sqlx.DB, n int, each func(ctx context.Context, userIDs []uint64) error) (count int64, sampleUserIDs []uint64, err error) {
	return b.PreviewKeep(ctx, db, n, nil, each)
}

// PreviewKeep is PreviewEach counting, sampling and passing on only the
// rows of each page that keep, if set, returns (a subset of the page, in
// its order): the rows a broadcast would send to when pushfan holds the
// audience to a rule of its own (the stale rule) beyond the query.
func (b Bound) PreviewKeep(ctx context.Context, db *sqlx.DB, n int, keep func(ctx context.Context, rows []Row) ([]Row, error),
	each func(ctx context.Context, userIDs []uint64) error) (count int64, sampleUserIDs []uint64, err error) {
	sampleUserIDs = []uint64{}
	var ids []uint64
	seen := make(map[uint64]struct{}, min(max(n, 0), 1024))
	var buf []Row
	var after uint64
	for {
		buf, err = b.page(ctx, db, after, math.MaxUint64, PreviewPageSize, buf, false)
		if err != nil {
			return 0, []uint64{}, fmt.Errorf("preview: %w", err)
		}
		read := len(buf)
		if read > 0 {
			after = buf[read-1].Cursor
		}
		kept := buf
		if keep != nil && read > 0 {
			if kept, err = keep(ctx, buf); err != nil {
				return 0, []uint64{}, fmt.Errorf("preview: %w", err)
			}
		}
		count += int64(len(kept))
		if each != nil && len(kept) > 0 {
			ids = ids[:0]
			for _, r := range kept {
				ids = append(ids, r.UserID)
			}
			if err := each(ctx, ids); err != nil {
				return 0, []uint64{}, fmt.Errorf("preview: %w", err)
			}
		}
		for _, r := range kept {
			if len(sampleUserIDs) >= n {
				break
			}
			if _, dup := seen[r.UserID]; !dup {
				seen[r.UserID] = struct{}{}
				sampleUserIDs = append(sampleUserIDs, r.UserID)
			}
		}
		if read < PreviewPageSize {
			return count, sampleUserIDs, nil
		}
	}
}
