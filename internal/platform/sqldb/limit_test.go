package sqldb_test

import (
	"testing"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
)

// A statement TimeLimited is stopped by the server at its limit, with an
// error IsTimeLimit knows and IsStatementError calls final; within its
// limit it answers as it would without one.
func TestTheServerStopsATimeLimitedStatement(t *testing.T) {
	tdb := testdb.New(t)
	ctx := t.Context()
	slow := "SELECT COUNT(*) FROM information_schema.columns a, information_schema.columns b, information_schema.columns c"
	start := time.Now()
	var n int64
	err := tdb.SQL.QueryRowContext(ctx, sqldb.TimeLimited(slow, 50*time.Millisecond)).Scan(&n)
	if !sqldb.IsTimeLimit(err) || !sqldb.IsStatementError(err) {
		t.Fatalf("a slow count under a 50ms limit: %d, %v; want the server's time limit", n, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the server stopped it after %v", took)
	}
	if err := tdb.SQL.QueryRowContext(ctx, sqldb.TimeLimited("SELECT 1 + ?", 10*time.Second), 1).Scan(&n); err != nil || n != 2 {
		t.Fatalf("a quick statement under a limit: %d, %v", n, err)
	}
	if got := sqldb.TimeLimited("UPDATE t SET a = 1", time.Second); got != "UPDATE t SET a = 1" {
		t.Fatalf("a statement other than a SELECT: %q", got)
	}
}
