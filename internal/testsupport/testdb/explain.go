package testdb

import (
	"database/sql"
	"testing"
)

// Explain runs q (an EXPLAIN) on db and returns its first row as column
// -> value: how a test asserts the plan MariaDB makes of a statement (the
// index a page reads, no filesort).
func Explain(t testing.TB, db *sql.DB, q string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("EXPLAIN returned nothing: %v", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}
