package sqldb

import (
	"strings"
	"unicode/utf8"
)

// MaxTextBytes is a TEXT column's width, in bytes.
const MaxTextBytes = 65535

// ClampRunes makes s storable in a utf8mb4 column of maxRunes characters
// (VARCHAR(n)) under strict SQL mode, which rejects both invalid UTF-8 and
// over-long values: invalid bytes become U+FFFD and the tail is cut on a
// rune boundary.
func ClampRunes(s string, maxRunes int) string {
	s = validUTF8(s)
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

// ClampBytes is ClampRunes for a column whose width is in bytes (TEXT):
// s is cut to at most maxBytes bytes, on a rune boundary.
func ClampBytes(s string, maxBytes int) string {
	s = validUTF8(s)
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
