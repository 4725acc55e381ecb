package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers we treat as transient.
const (
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: InnoDB rolled our transaction back
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
)

// maxTxAttempts bounds retries of a transaction that InnoDB chose as a
// deadlock victim; the retry is safe because the whole transaction was rolled
// back.
const maxTxAttempts = 5

// dbTime converts t to what a DATETIME(6) column will hold: UTC, truncated to
// the microsecond. Returning the same value we store keeps round trips equal.
func dbTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// nullTime turns a nullable column into the *time.Time our structs use.
func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time.UTC()
	return &v
}

// timeArg is the inverse of nullTime for query arguments.
func timeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return dbTime(*t)
}

// nullIfEmpty maps "" to SQL NULL for optional text columns.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// clampText makes s storable in a utf8mb4 column of maxRunes characters under
// strict SQL mode, which rejects both invalid UTF-8 and over-long values:
// invalid bytes become U+FFFD and the tail is cut on a rune boundary.
func clampText(s string, maxRunes int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= maxRunes { // bytes >= runes, so this is the cheap common case
		return s
	}
	n := 0
	for i := range s {
		if n == maxRunes {
			return s[:i]
		}
		n++
	}
	return s
}

// clampBytes cuts s to at most maxBytes bytes on a rune boundary (for TEXT
// columns, whose limit is in bytes).
func clampBytes(s string, maxBytes int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// isRetryable reports whether err is a deadlock or lock wait timeout, after
// which InnoDB has rolled the statement or transaction back.
func isRetryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == errLockDeadlock || me.Number == errLockWaitTimeout
	}
	return false
}

// inTx runs fn in a transaction, committing when it returns nil. A deadlock
// victim is retried (up to maxTxAttempts, with a short growing pause) because
// InnoDB may legitimately pick any of two concurrent upserts as its victim.
func (s *Store) inTx(ctx context.Context, name string, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = s.tryTx(ctx, fn)
		if err == nil || !isRetryable(err) || attempt == maxTxAttempts {
			break
		}
		s.log.Debug("retrying transaction after lock conflict", "tx", name, "attempt", attempt, "err", err)
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

func (s *Store) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
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

// placeholders returns "(?,?,...),(?,?,...)": rows groups of cols
// placeholders, for multi-row INSERTs.
func placeholders(rows, cols int) string {
	return repeatRows(rows, "("+strings.TrimSuffix(strings.Repeat("?,", cols), ",")+")")
}

// repeatRows joins rows copies of one VALUES tuple with commas.
func repeatRows(rows int, tuple string) string {
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

// isDuplicateEntry reports MySQL's ER_DUP_ENTRY (a UNIQUE key clash).
func isDuplicateEntry(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

func triggerOrAPI(t string) string {
	if t == "" {
		return "api"
	}
	return t
}
