package sqldb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
)

// TestAStalledTransactionFreesItsLocks: a transaction that holds a row lock
// and then sits idle (its process stalled) is ended by the server after
// the idle transaction timeout, so another session's write of that row
// goes through instead of waiting for the stalled process; the stalled
// transaction's next statement fails, and nothing of it was kept.
func TestAStalledTransactionFreesItsLocks(t *testing.T) {
	tdb := testdb.New(t)
	ctx := t.Context()
	var version string
	if err := tdb.SQL.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		t.Skipf("idle_transaction_timeout is MariaDB's; the server is %s", version)
	}
	// Open's own pool sets the production timeout on every session.
	var secs int
	if err := tdb.SQL.QueryRowContext(ctx, "SELECT @@SESSION.idle_transaction_timeout").Scan(&secs); err != nil || secs != 30 {
		t.Fatalf("Open's sessions: idle_transaction_timeout %d (%v), want 30", secs, err)
	}

	db, err := sqldb.OpenWithIdleTx(ctx, tdb.DSN, 4, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "INSERT INTO late_holders (broadcast_id, seq, epoch, ckpt_seq, rest, closed_at) VALUES (1, 0, 1, 0, 5, UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "UPDATE late_holders SET rest = 4 WHERE broadcast_id = 1"); err != nil {
		t.Fatal(err)
	}
	// The stall: the transaction idles past its timeout while another
	// session writes the row it locked. innodb_lock_wait_timeout is 50 s by
	// default: a write that waits for the lock takes that long and fails.
	other, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := db.ExecContext(other, "UPDATE late_holders SET rest = 3 WHERE broadcast_id = 1"); err != nil {
		t.Fatalf("a write of the row a stalled transaction locked failed after %v: %v", time.Since(start), err)
	}
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("the write waited %v for the stalled transaction's lock, want about its 1 s idle timeout", waited)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE late_holders SET rest = 2 WHERE broadcast_id = 1"); err == nil {
		t.Fatal("the stalled transaction went on after the server ended it")
	} else if err := tx.Commit(); err == nil {
		t.Fatal("the stalled transaction committed after the server ended it")
	}
	var rest int
	if err := db.QueryRowContext(ctx, "SELECT rest FROM late_holders WHERE broadcast_id = 1").Scan(&rest); err != nil || rest != 3 {
		t.Fatalf("rest = %d (%v), want 3: the other session's write, and nothing of the stalled transaction", rest, err)
	}
}
