// Package apierror is the API's error: a status, a stable snake_case code,
// a message for a person and the request field at fault. Package server
// and its route packages (server/webhooks, server/segments, ...) return
// it; server's one error handler writes it as
// {"error": {"code", "message", "field"}}.
package apierror

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Error is an error with a status, a stable snake_case code and a human
// message; every 4xx the API returns is one of these.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string // the request field at fault, when there is one
	// Problems are every problem of a failed reload (reload_failed).
	Problems []string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// BadRequest is a 400 naming the field at fault.
func BadRequest(code, field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404.
func NotFound(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: code, Message: fmt.Sprintf(format, args...)}
}

// RateLimited is a 429 whose Retry-After (set in h) is wait, in whole
// seconds, at least 1.
func RateLimited(h http.Header, wait time.Duration, msg string) *Error {
	secs := strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
	h.Set("Retry-After", secs)
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: msg + "; retry in " + secs + " s"}
}
