package testdb

import (
	"database/sql"
	"testing"
	"time"
)

// lockPoll is how often WaitForLockWait asks. InnoDB answers
// information_schema.INNODB_TRX and INNODB_LOCKS from a cache it refreshes
// only when nobody read it for 100 ms: a poll every 10 ms keeps the
// cache from the first read forever and never sees the wait begin.
const lockPoll = 250 * time.Millisecond

// WaitForLockWait waits, up to within, until a session of db's database
// waits for a row lock on a table whose name contains table ("" for
// any), and fails the test if none does by then.
func WaitForLockWait(tb testing.TB, db *sql.DB, table string, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			JOIN information_schema.INNODB_LOCKS l ON l.lock_id = t.trx_requested_lock_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE() AND l.lock_table LIKE ?`, "%"+table+"%").Scan(&n)
		if err != nil {
			tb.Fatalf("read the lock waits: %v", err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for a session to wait for a lock on %q", within, table)
		}
		time.Sleep(lockPoll)
	}
}
