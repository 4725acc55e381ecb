package repository

import (
	"database/sql"
	"strings"
	"time"
	"unicode/utf8"
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

func triggerOrAPI(t string) string {
	if t == "" {
		return "api"
	}
	return t
}
