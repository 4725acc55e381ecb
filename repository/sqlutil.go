package repository

import (
	"database/sql"
	"time"
)

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

// nullIfZero maps a zero number to SQL NULL for optional columns.
func nullIfZero[N int64 | uint64 | float64](n N) any {
	if n == 0 {
		return nil
	}
	return n
}

// nullIfEmpty maps "" to SQL NULL for optional text columns.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func triggerOrAPI(t string) string {
	if t == "" {
		return "api"
	}
	return t
}
