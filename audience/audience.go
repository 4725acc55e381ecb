// Package audience compiles the named SQL audiences of the YAML config
// (PUSHFAN_CONFIG), binds typed request parameters to them, pages their rows
// by keyset (a Runner runs their SQL on the pool it is given), and renders
// personalized messages from their extra columns.
//
// An audience is one SELECT over the deployment's own tables:
//
//	audiences:
//	  - name: renewal_due
//	    description: users whose subscription renews in :days_before days
//	    params: {days_before: int, locale: string}
//	    sql: |
//	      SELECT t.id AS `cursor`, t.user_id, t.token, s.plan, s.amount
//	      FROM device_tokens t JOIN users u ON u.id = t.user_id
//	      JOIN subscriptions s ON s.user_id = t.user_id
//	      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1
//	        AND s.renews_on = CURRENT_DATE + INTERVAL :days_before DAY
//	      ORDER BY t.id LIMIT :limit
//
// The query contract:
//
//   - It is a single SELECT (or WITH ... SELECT) statement.
//   - It uses :after and :limit for keyset paging: it must return only rows
//     whose cursor is greater than :after, ordered by cursor ascending, at
//     most :limit of them ("WHERE <cursor> > :after ... ORDER BY <cursor>
//     LIMIT :limit").
//   - It returns the columns cursor, user_id and token (matched without
//     regard to case; CURSOR is a reserved word, so write t.id AS `cursor`).
//     cursor and user_id are unsigned integers; cursor is positive and
//     strictly increasing across the result (a unique key such as
//     device_tokens.id; paging starts after 0), so that a cursor value names
//     one row. Page returns an error when a page is not strictly increasing.
//   - It may return token_id (ColTokenID) when its cursor is the app's
//     token id, equal to cursor on every row: its broadcasts' outcomes are
//     then listed by token and user. Page returns an error for a row whose
//     token_id differs from its cursor.
//   - Every other column is a template variable named by the column (alias
//     it with AS to a name like plan or renews_on), rendered as a string:
//     NULL is "", DATE is YYYY-MM-DD, DATETIME/TIMESTAMP are
//     "YYYY-MM-DD hh:mm:ss[.ffffff]", DECIMAL keeps its scale ("19.90").
//   - It may use :upto ("AND <cursor> <= :upto"): pushfan then splits the
//     audience into cursor ranges, chunks that instances send in parallel
//     (see ParamUpto). Without it the audience is sent as one chunk.
//   - Every other :name is a parameter declared under params with a type:
//     int, string, bool or date (YYYY-MM-DD, bound as that string).
//
// Parameter values are never put into the SQL text by this package: the
// query keeps a "?" per placeholder and the values go to the driver as
// arguments. go-sql-driver/mysql then either sends them with a server-side
// prepared statement or, with interpolateParams (repository.Open's default),
// escapes them itself for the connection's character set. Either way a
// value cannot change the query.
//
// The audience rule of the contract (only valid tokens of users with
// push_enabled = 1) is the query's to apply: this package runs the SQL as
// written.
package audience

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"pushfan/config"

	"github.com/jmoiron/sqlx"
)

// Parameter types a Definition may declare.
const (
	TypeInt    = "int"    // a whole number (JSON number without fraction), bound as int64
	TypeString = "string" // any JSON string, bound as is
	TypeBool   = "bool"   // a JSON boolean, bound as a boolean (1/0)
	TypeDate   = "date"   // a JSON string YYYY-MM-DD naming a real date, bound as that string
)

// The placeholders every audience query must use for keyset paging, and
// the optional upper bound that lets pushfan split it into chunks.
const (
	ParamAfter = "after"
	ParamLimit = "limit"
	// ParamUpto, when the query uses it ("AND <cursor> <= :upto"), bounds a
	// page by its chunk's upper cursor, so no page reads past its chunk.
	// Without it, PageRange drops the rows past the chunk's end.
	ParamUpto = "upto"
)

// The columns every audience query must return.
const (
	ColCursor = "cursor"
	ColUserID = "user_id"
	ColToken  = "token"
)

// ColTimezone is an optional column: the IANA zone of the row's user. A
// local-time delivery (send_at_local, quiet hours) takes it over the
// users table's zone; NULL or empty falls back to that. It is a template
// variable too, like every other extra column.
const ColTimezone = "timezone"

// unquotedCursor spots the commonest mistake in an audience query: CURSOR is
// a reserved word in MySQL and MariaDB, so the alias needs backquotes.
var unquotedCursor = regexp.MustCompile(`(?i)\bAS\s+cursor\b`)

// maxNameLen bounds an audience name (it appears in URLs and in broadcast
// rows).
const maxNameLen = 64

// builtinNames are the audiences the API knows without configuration;
// a configured audience may not shadow them.
var builtinNames = []string{"all", "user_ids"}

// Definition is a named audience as the YAML config holds it
// (config.Audience); Compile turns definitions into Audiences.
type Definition = config.Audience

// Audience is a compiled Definition. It is safe for concurrent use once
// Check has returned.
type Audience struct {
	name        string
	description string
	sql         string            // as configured
	query       string            // rewritten with positional ?
	argNames    []string          // argNames[i] is the parameter of the i-th ?
	params      map[string]string // declared name -> type

	mu          sync.RWMutex
	checked     bool
	vars        []string // extra columns, in query order; set by Check
	tokenCursor bool     // it returns token_id (ColTokenID); set by Check
}

// Compile validates every definition and rewrites its SQL from named to
// positional placeholders, recording the argument order. It reports every
// problem it finds, each naming its audience, joined into one error (nil
// audiences then). Compile does not touch the database: Check does.
//
// Rules: a name of letters, digits, _ and - (at most 64, unique, not a
// built-in audience name); a single SELECT or WITH statement without
// positional ?; :after and :limit used; every other placeholder declared
// under params and every declared param used; known types; param names that
// are identifiers and not after or limit.
func Compile(defs []Definition) ([]*Audience, error) {
	var errs []error
	out := make([]*Audience, 0, len(defs))
	firstIndex := make(map[string]int, len(defs))
	for i, d := range defs {
		a, err := compileOne(i, d)
		if err != nil {
			errs = append(errs, err)
		}
		if d.Name != "" {
			if j, dup := firstIndex[d.Name]; dup {
				errs = append(errs, fmt.Errorf("audience %q: duplicate name (audience #%d has it too)", d.Name, j+1))
				continue
			}
			firstIndex[d.Name] = i
		}
		if a != nil {
			out = append(out, a)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// compileOne compiles d (defs[i]); on failure it returns nil and every
// problem found.
func compileOne(i int, d Definition) (*Audience, error) {
	label := fmt.Sprintf("audience %q", d.Name)
	if d.Name == "" {
		label = fmt.Sprintf("audience #%d", i+1)
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(label+": "+format, args...))
	}

	switch {
	case d.Name == "":
		fail("name is empty")
	case len(d.Name) > maxNameLen:
		fail("name is longer than %d characters", maxNameLen)
	case !validName(d.Name):
		fail("name may hold only letters, digits, _ and -")
	case slices.Contains(builtinNames, d.Name):
		fail("name is reserved for the built-in audience")
	}

	for _, p := range slices.Sorted(maps.Keys(d.Params)) {
		typ := d.Params[p]
		switch {
		case p == ParamAfter || p == ParamLimit || p == ParamUpto:
			fail("param %q is reserved for keyset paging: do not declare it", p)
			continue
		case !isIdent(p):
			fail("param %q: a name must be letters, digits and _ (not starting with a digit)", p)
			continue
		}
		if !knownType(typ) {
			fail("param %q has unknown type %q (want %s, %s, %s or %s)", p, typ, TypeInt, TypeString, TypeBool, TypeDate)
		}
	}

	if strings.TrimSpace(d.SQL) == "" {
		fail("sql is empty")
		return nil, errors.Join(errs...)
	}
	sc, err := scanSQL(d.SQL)
	if err != nil {
		fail("sql: %v", err)
		return nil, errors.Join(errs...)
	}
	if kw := firstKeyword(sc.query); kw != "SELECT" && kw != "WITH" {
		fail("sql must be a SELECT (or WITH ... SELECT) statement, not %q", kw)
	}

	used := make(map[string]bool, len(sc.names))
	var undeclared []string
	for _, n := range sc.names {
		if used[n] {
			continue
		}
		used[n] = true
		if n == ParamAfter || n == ParamLimit || n == ParamUpto {
			continue
		}
		if _, ok := d.Params[n]; !ok {
			undeclared = append(undeclared, n)
		}
	}
	for _, p := range []string{ParamAfter, ParamLimit} {
		if !used[p] {
			fail("sql does not use :%s (keyset paging needs WHERE <cursor> > :after ... ORDER BY <cursor> LIMIT :limit)", p)
		}
	}
	for _, n := range undeclared {
		fail("sql uses :%s, which is not declared under params", n)
	}
	for _, p := range slices.Sorted(maps.Keys(d.Params)) {
		if p != ParamAfter && p != ParamLimit && p != ParamUpto && !used[p] {
			fail("param %q is declared but the sql never uses :%s", p, p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Audience{
		name:        d.Name,
		description: d.Description,
		sql:         d.SQL,
		query:       sc.query,
		argNames:    sc.names,
		params:      maps.Clone(d.Params),
	}, nil
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isIdentPart(c) && c != '-' {
			return false
		}
	}
	return s != ""
}

func knownType(t string) bool {
	switch t {
	case TypeInt, TypeString, TypeBool, TypeDate:
		return true
	}
	return false
}

// Name returns the audience's name.
func (a *Audience) Name() string { return a.name }

// Description returns the audience's description (may be empty).
func (a *Audience) Description() string { return a.description }

// SQL returns the query as configured (with named placeholders).
func (a *Audience) SQL() string { return a.sql }

// ParamTypes returns a copy of the declared parameters and their types.
func (a *Audience) ParamTypes() map[string]string {
	m := maps.Clone(a.params)
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// Vars returns the template variables (the columns other than cursor,
// user_id and token, in query order). It is nil until Check has succeeded:
// run Check at start-up, before using Vars to validate templates (a nil vars
// makes ParseTemplate skip its unknown-variable check).
func (a *Audience) Vars() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if !a.checked {
		return nil
	}
	v := slices.Clone(a.vars)
	if v == nil {
		v = []string{}
	}
	return v
}

// TokenCursor reports whether the audience's cursor is the app's token id:
// its query returns token_id (ColTokenID), which Check found equal to the
// cursor on the rows it sampled and every page holds it to. False until
// Check has succeeded.
func (a *Audience) TokenCursor() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.checked && a.tokenCursor
}

// Check validates the audience against the database, for start-up: the query
// prepares on the server, and running it with zero parameters (0, "", false,
// 1970-01-01), :after 0 and :limit 0 — inside a read-only transaction that is
// rolled back — returns the columns cursor and user_id (integers) and token,
// no column twice, and extra columns whose names are template variables
// ([A-Za-z_][A-Za-z0-9_]*). A query that returns token_id is run again in the
// same transaction, with zero params and :limit 100, and every row it returns
// must have token_id equal to cursor (what zero params select may be no row:
// the pages hold every row to it at send time). On success it records Vars
// and TokenCursor. Every error names the audience.
func (a *Audience) Check(ctx context.Context, db *sqlx.DB) error {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("audience %q: check: begin read-only transaction: %w", a.name, err)
	}
	defer func() { _ = tx.Rollback() }()

	stmt, err := tx.PreparexContext(ctx, a.query)
	if err != nil {
		if unquotedCursor.MatchString(a.query) {
			return fmt.Errorf("audience %q: sql does not prepare (note: CURSOR is a reserved word, write AS `cursor`): %w", a.name, err)
		}
		return fmt.Errorf("audience %q: sql does not prepare: %w", a.name, err)
	}
	defer stmt.Close()

	zero := make(map[string]any, len(a.params))
	for p, typ := range a.params {
		zero[p] = zeroValue(typ)
	}
	rows, err := stmt.QueryContext(ctx, a.args(zero, 0, math.MaxUint64, 0)...)
	if err != nil {
		return fmt.Errorf("audience %q: sql fails when run with zero params and :limit 0: %w", a.name, err)
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return fmt.Errorf("audience %q: read result columns: %w", a.name, err)
	}
	for rows.Next() {
		// LIMIT 0 returns nothing; a row here means the query ignores :limit.
		return fmt.Errorf("audience %q: sql returned a row with :limit 0: it must end in LIMIT :limit", a.name)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audience %q: sql fails when run with zero params and :limit 0: %w", a.name, err)
	}

	l, err := newLayout(cols)
	if err != nil {
		return nameEach(a.name, err)
	}
	rows.Close() // the connection reads one result at a time
	if l.tokenID >= 0 {
		if err := a.checkTokenIDs(ctx, stmt, zero); err != nil {
			return err
		}
	}
	vars := make([]string, len(l.vars))
	for i, v := range l.vars {
		vars[i] = v.name
	}
	a.mu.Lock()
	a.vars, a.checked, a.tokenCursor = vars, true, l.tokenID >= 0
	a.mu.Unlock()
	return nil
}

// zeroValue is the value a parameter of type typ gets in Check.
func zeroValue(typ string) any {
	switch typ {
	case TypeInt:
		return int64(0)
	case TypeBool:
		return false
	case TypeDate:
		return "1970-01-01"
	default:
		return ""
	}
}

// args returns the statement arguments in placeholder order.
func (a *Audience) args(values map[string]any, after, upto uint64, limit int) []any {
	out := make([]any, len(a.argNames))
	for i, n := range a.argNames {
		switch n {
		case ParamAfter:
			out[i] = after
		case ParamUpto:
			out[i] = upto
		case ParamLimit:
			out[i] = int64(limit)
		default:
			out[i] = values[n]
		}
	}
	return out
}

// nameEach prefixes every error joined in err with the audience's name, so
// each line of a multi-line error names it.
func nameEach(name string, err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return fmt.Errorf("audience %q: %w", name, err)
	}
	errs := j.Unwrap()
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = fmt.Errorf("audience %q: %w", name, e)
	}
	return errors.Join(out...)
}
