// Package sqldb holds the few MySQL helpers every storage package shares:
// one transaction runner (with deadlock retries), the classification of
// driver errors, and placeholder builders for multi-row statements.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers with a meaning for the callers.
const (
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: InnoDB rolled the transaction back
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDupEntry        = 1062 // ER_DUP_ENTRY: a UNIQUE key clash
)

// maxTxAttempts bounds retries of a transaction that InnoDB chose as a
// deadlock victim; the retry is safe because the whole transaction was
// rolled back.
const maxTxAttempts = 5

// Execer is what a statement needs: the pool or a transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier reads: the pool or a transaction.
type Querier interface {
	Execer
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrConflict marks the error of a transaction that must run again from
// its start: what it read changed before it wrote (InTx retries it).
var ErrConflict = errors.New("rows changed since they were read; running the transaction again")

// IsRetryable reports a deadlock or lock wait timeout, after which InnoDB
// has rolled the statement or transaction back: running it again is safe.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrConflict) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == errLockDeadlock || me.Number == errLockWaitTimeout
	}
	return false
}

// Server errors that mean the connection or the server, not the
// statement, failed: the same statement may work on the next try.
const (
	errConnCount      = 1040 // ER_CON_COUNT_ERROR: too many connections
	errServerShutdown = 1053 // ER_SERVER_SHUTDOWN
	errQueryKilled    = 1317 // ER_QUERY_INTERRUPTED
	errConnKilled     = 1927 // ER_CONNECTION_KILLED (MariaDB)
)

// IsStatementError reports an error that is the database's answer to the
// statement itself (an unknown column or table, a syntax error, a refused
// privilege, a value out of range) or that came from the caller's own
// checks before any statement was sent: running the same statement again
// gives the same error. Connection losses, timeouts, deadlocks and lock
// waits, a killed query or a server shutting down are not: those may pass
// on the next try.
func IsStatementError(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errLockDeadlock, errLockWaitTimeout, errConnCount, errServerShutdown, errQueryKilled, errConnKilled:
			return false
		}
	}
	return true
}

// IsDuplicateEntry reports MySQL's ER_DUP_ENTRY (a UNIQUE key clash).
func IsDuplicateEntry(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}

// InTx runs fn in a transaction on db, committing when it returns nil. A
// deadlock victim is retried (up to 5 attempts, with a short growing pause)
// because InnoDB may pick either of two concurrent transactions as its
// victim. Errors are wrapped with name.
//
// An error from InTx does not always mean nothing happened: when the
// connection drops after the server applied COMMIT but before its answer
// arrived, the transaction committed and the caller sees an error. Callers
// whose transaction decides something (a claim, a checkpoint, a submit)
// make it recognisable on retry; see package lease.
func InTx(ctx context.Context, db *sql.DB, log *slog.Logger, name string, fn func(tx *sql.Tx) error) error {
	log = OrDiscard(log)
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = tryTx(ctx, db, fn)
		if err == nil || !IsRetryable(err) || attempt == maxTxAttempts {
			break
		}
		log.Debug("retrying transaction after lock conflict", "tx", name, "attempt", attempt, "err", err)
		t := time.NewTimer(time.Duration(attempt) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func tryTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Placeholders returns "(?,?,...),(?,?,...)": rows groups of cols
// placeholders, for multi-row INSERTs.
func Placeholders(rows, cols int) string {
	return RepeatRows(rows, "("+InList(cols)+")")
}

// InList returns n placeholders, "?,?,?", for an IN list.
func InList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// RepeatRows joins rows copies of one VALUES tuple with commas.
func RepeatRows(rows int, tuple string) string {
	var b strings.Builder
	b.Grow(rows * (len(tuple) + 1))
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tuple)
	}
	return b.String()
}

// OrDiscard returns log, or a logger that drops everything when log is nil.
func OrDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// serverErrorNumber is the server's error number in err, if it is one.
func serverErrorNumber(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
}
