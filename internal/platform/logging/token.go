package logging

import "strings"

// TokenPrefix shows enough of a device token to tell it apart in a log
// (12 characters of an FCM token's 150 or so) and never the whole of one,
// however short: logs carry ids and no whole token.
func TokenPrefix(token string) string {
	return token[:min(12, len(token)/2)] + "…"
}

// RedactToken replaces token in s (a database error that quotes the value,
// say a duplicate key) with its prefix.
func RedactToken(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, TokenPrefix(token))
}
