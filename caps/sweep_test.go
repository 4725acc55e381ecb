package caps_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/caps"
	"pushfan/internal/testsupport/testdb"
)

// sweepFixture is a ledger with a finished broadcast (done, ended two
// hours ago) between two running ones (early, started before it, and
// late), each with answers and holds for users 1..n of its own.
type sweepFixture struct {
	tdb               *testdb.DB
	db                *sql.DB
	dsn               string
	early, done, late uint64
}

func newSweepFixture(t *testing.T, running, due int) sweepFixture {
	t.Helper()
	tdb := testdb.New(t)
	f := sweepFixture{tdb: tdb, db: tdb.SQL.DB, dsn: tdb.DSN}
	insert := func(status, finished string) uint64 {
		res, err := f.db.Exec(`INSERT INTO broadcasts (message, audience, status, finished_at) VALUES ('{}', '{"all":true}', ?, `+finished+`)`, status)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return uint64(id)
	}
	f.early = insert("running", "NULL")
	f.done = insert("completed", "UTC_TIMESTAMP(6) - INTERVAL 2 HOUR")
	f.late = insert("running", "NULL")
	for _, b := range []struct {
		id uint64
		n  int
	}{{f.early, running}, {f.done, due}, {f.late, running}} {
		mustExec(t, f.db, fmt.Sprintf("INSERT INTO frequency_users (broadcast_id, user_id, state) SELECT %d, seq, 3 FROM seq_1_to_%d", b.id, b.n))
		mustExec(t, f.db, fmt.Sprintf("INSERT INTO frequency_holds (broadcast_id, user_id, chunk, epoch, upto, targets) SELECT %d, seq, seq %% 4, 1, seq, 0 FROM seq_1_to_%d", b.id, b.n))
	}
	return f
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// rows counts b's answers and holds.
func (f sweepFixture) rows(t *testing.T, b uint64) (answers, holds int) {
	t.Helper()
	if err := f.db.QueryRow("SELECT (SELECT COUNT(*) FROM frequency_users WHERE broadcast_id = ?), (SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id = ?)", b, b).Scan(&answers, &holds); err != nil {
		t.Fatal(err)
	}
	return answers, holds
}

// impatient is a pool on the fixture's database whose sessions wait at
// most a second for a row lock (innodb_lock_wait_timeout, 50 s by
// default): a statement that needs a lock another transaction holds
// fails with 1205 instead.
func (f sweepFixture) impatient(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// lockRows begins a transaction on its own connection that locks the
// rows query selects (FOR UPDATE), as a checkpoint writing them does; the
// transaction is rolled back when the test ends.
func lockRows(t *testing.T, db *sql.DB, query string, args ...any) *sql.Tx {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	rows, err := tx.Query(query+" FOR UPDATE", args...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n == 0 {
		t.Fatalf("%s locked no row", query)
	}
	return tx
}

// The sweep reads and locks only the rows of the broadcasts it deletes
// (issue 38, defect 2). Deleting "WHERE broadcast_id IN (SELECT id FROM
// broadcasts WHERE ... finished)" ran as a dependent subquery, a scan of
// the whole table that locked every row it read until the statement's
// end, the running broadcasts' rows too.
//
// First, while another transaction holds every row of the two running
// broadcasts locked (their checkpoints writing them), a sweep whose
// session waits at most a second for a lock deletes the finished
// broadcast's rows without waiting. Then, while the sweep waits for a row
// of the finished broadcast that another transaction holds, a session as
// impatient writes, inserts and deletes rows of both running broadcasts
// (below and above their rows): the sweep holds no lock on them.
func TestSweepNeitherWaitsForNorBlocksARunningBroadcast(t *testing.T) {
	const running, due = 3000, 12000 // more than a delete's batch
	f := newSweepFixture(t, running, due)
	impatient := f.impatient(t)
	ctx := t.Context()
	sweepAt := time.Now().Add(-time.Hour)

	checkpoint := lockRows(t, f.db, "SELECT user_id FROM frequency_users WHERE broadcast_id IN (?, ?)", f.early, f.late)
	if _, err := checkpoint.Exec("SELECT chunk FROM frequency_holds WHERE broadcast_id IN (?, ?) FOR UPDATE", f.early, f.late); err != nil {
		t.Fatal(err)
	}
	n, err := caps.NewLedger(impatient, nil).Sweep(ctx, sweepAt, sweepAt)
	if err != nil {
		t.Fatalf("the sweep waited for the running broadcasts' locked rows: %v", err)
	}
	if err := checkpoint.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n != 2*due {
		t.Errorf("swept %d rows, want the finished broadcast's %d answers and %d holds", n, due, due)
	}
	for _, b := range []uint64{f.early, f.late} {
		if a, h := f.rows(t, b); a != running || h != running {
			t.Errorf("running broadcast %d kept %d answers and %d holds of %d each", b, a, h, running)
		}
	}
	if a, h := f.rows(t, f.done); a != 0 || h != 0 {
		t.Errorf("the finished broadcast kept %d answers and %d holds", a, h)
	}

	// Again, the sweep stuck midway on a locked row of the finished one.
	mustExec(t, f.db, fmt.Sprintf("INSERT INTO frequency_users (broadcast_id, user_id, state) SELECT %d, seq, 3 FROM seq_1_to_%d", f.done, due))
	mustExec(t, f.db, fmt.Sprintf("INSERT INTO frequency_holds (broadcast_id, user_id, chunk, epoch, upto, targets) SELECT %d, seq, 0, 1, seq, 0 FROM seq_1_to_%d", f.done, due))
	stuck := lockRows(t, f.db, "SELECT user_id FROM frequency_users WHERE broadcast_id = ? AND user_id = ?", f.done, due-1)
	type result struct {
		n   int64
		err error
	}
	swept := make(chan result, 1)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		n, err := caps.NewLedger(f.db, nil).Sweep(sctx, sweepAt, sweepAt)
		swept <- result{n, err}
	}()
	testdb.WaitForLockWait(t, f.db, "frequency_users", time.Minute)
	for _, b := range []uint64{f.early, f.late} {
		for _, q := range []string{
			"UPDATE frequency_users SET state = 1 WHERE broadcast_id = ?",
			"UPDATE frequency_holds SET targets = targets + 1 WHERE broadcast_id = ?",
			"INSERT INTO frequency_users (broadcast_id, user_id, state) VALUES (?, 0, 1), (?, 999999, 1)",
			"INSERT INTO frequency_holds (broadcast_id, user_id, chunk, epoch, upto, targets) VALUES (?, 0, 0, 1, 0, 1), (?, 999999, 0, 1, 0, 1)",
			"DELETE FROM frequency_users WHERE broadcast_id = ? AND user_id IN (0, 999999)",
		} {
			args := []any{b}
			if q[0] == 'I' {
				args = append(args, b)
			}
			if _, err := impatient.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("running broadcast %d, while the sweep waits: %s: %v", b, q, err)
			}
		}
	}
	if err := stuck.Rollback(); err != nil {
		t.Fatal(err)
	}
	r := <-swept
	if r.err != nil || r.n != 2*due {
		t.Fatalf("the second sweep: %d rows, %v; want %d", r.n, r.err, 2*due)
	}
}

// At scale: with 200,000 answers and holds of a running broadcast in the
// ledger, a sweep of a finished broadcast's 10,000 reads its rows and a
// few more (MariaDB's table statistics), not the running one's.
func TestSweepReadsOnlyTheFinishedBroadcastsRows(t *testing.T) {
	const running, due = 100000, 10000
	f := newSweepFixture(t, running, due)
	rr := testdb.NewRowsRead(t, f.tdb.SQL)
	sweepAt := time.Now().Add(-time.Hour)
	var n int64
	read := rr.During(func() {
		var err error
		if n, err = caps.NewLedger(f.db, nil).Sweep(t.Context(), sweepAt, sweepAt); err != nil {
			t.Fatal(err)
		}
	}, "frequency_users", "frequency_holds")
	t.Logf("swept %d rows of a finished broadcast beside %d of two running ones: rows read %v", n, 4*running, read)
	if n != 2*due {
		t.Fatalf("swept %d rows, want %d", n, 2*due)
	}
	// Each due row is read twice (its key, then the delete), plus a
	// probe per broadcast and batch.
	for table, got := range read {
		if got > 2*due+100 {
			t.Errorf("the sweep read %d rows of %s to delete %d: it read the running broadcasts' rows", got, table, due)
		}
	}
}
