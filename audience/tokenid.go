package audience

import (
	"context"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"
)

// ColTokenID is an optional column by which a query says that its cursor
// IS the app's token id (the tokens table's id): each row's token_id must
// equal its cursor. A broadcast to such an audience keeps its outcomes by
// token, as the built-in audiences' are, so a user's deliveries find them
// and its export names each target's user and token (docs/outcomes.md).
// Check refuses an audience whose sampled rows break the rule, and a page
// with a row that breaks it fails (Page). It is a template variable too,
// like every other extra column.
const ColTokenID = "token_id"

// checkSample is how many rows Check reads (with zero params) to hold an
// audience that returns token_id to its rule.
const checkSample = 100

// checkTokenIDs runs the prepared query for a sample of checkSample rows
// and refuses the audience when one's token_id differs from its cursor:
// an audience that says its cursor is the token id and is wrong would
// have its outcomes listed under other users' tokens.
func (a *Audience) checkTokenIDs(ctx context.Context, stmt *sqlx.Stmt, zero map[string]any) error {
	rows, err := stmt.QueryContext(ctx, a.args(zero, 0, math.MaxUint64, checkSample)...)
	if err != nil {
		return fmt.Errorf("audience %q: sql fails when run with zero params and :limit %d: %w", a.name, checkSample, err)
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return fmt.Errorf("audience %q: read result columns: %w", a.name, err)
	}
	l, err := newLayout(cols)
	if err != nil {
		return nameEach(a.name, err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		n++
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("audience %q: sample row %d: scan: %w", a.name, n, err)
		}
		if _, err := makeRow(l, vals, false); err != nil {
			return fmt.Errorf("audience %q: sample row %d: %w", a.name, n, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audience %q: sql fails when run with zero params and :limit %d: %w", a.name, checkSample, err)
	}
	return nil
}
