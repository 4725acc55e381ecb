package testdb

import (
	"testing"

	"github.com/jmoiron/sqlx"
)

// RowsRead counts the rows the server has read from each table of one
// test database, from MariaDB's own statistics (information_schema
// TABLE_STATISTICS, on with userstat): what proves an algorithm's cost
// in rows ("one scan of the audience", "the claim reads no waiting chunk",
// "a submit reads no token") without timing anything. Every test has a
// database of its own, so nothing else adds to its counts.
type RowsRead struct {
	tb testing.TB
	db *sqlx.DB
}

// NewRowsRead turns the server's table statistics on (a global switch;
// it costs a counter per handler call) and returns a reader for db's
// database. It fails the test on a server without them (MySQL).
func NewRowsRead(tb testing.TB, db *sqlx.DB) *RowsRead {
	tb.Helper()
	if _, err := db.Exec("SET GLOBAL userstat = 1"); err != nil {
		tb.Fatalf("table statistics need MariaDB's userstat (SET GLOBAL userstat = 1): %v", err)
	}
	return &RowsRead{tb: tb, db: db}
}

// Of returns the rows read so far from each of tables.
func (r *RowsRead) Of(tables ...string) map[string]int64 {
	r.tb.Helper()
	out := make(map[string]int64, len(tables))
	for _, t := range tables {
		out[t] = 0
	}
	q, args, err := sqlx.In(`SELECT TABLE_NAME, ROWS_READ FROM information_schema.TABLE_STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?)`, tables)
	if err != nil {
		r.tb.Fatal(err)
	}
	rows, err := r.db.Query(q, args...)
	if err != nil {
		r.tb.Fatalf("table statistics: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			r.tb.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		r.tb.Fatal(err)
	}
	return out
}

// During returns the rows read from each of tables while fn ran.
func (r *RowsRead) During(fn func(), tables ...string) map[string]int64 {
	r.tb.Helper()
	before := r.Of(tables...)
	fn()
	after := r.Of(tables...)
	for t := range after {
		after[t] -= before[t]
	}
	return after
}
