package fanout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"
)

// Class is what the engine does with an outcome.
type Class uint8

const (
	// Success: FCM accepted the message.
	Success Class = iota
	// Dead: the token will never work again (UNREGISTERED, SENDER_ID_MISMATCH,
	// INVALID_ARGUMENT about the token). Never retried; invalidated.
	Dead
	// Transient: worth another attempt later (quota, UNAVAILABLE, INTERNAL,
	// network errors, a per-send timeout).
	Transient
	// Fatal: every other token would fail the same way (bad credentials, a
	// malformed message). The broadcast stops early.
	Fatal
	// Rejected: this target cannot be sent (its personalized message does
	// not render); the token is fine, nothing is retried.
	Rejected
)

func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Dead:
		return "dead"
	case Transient:
		return "transient"
	case Fatal:
		return "fatal"
	case Rejected:
		return "rejected"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Error codes pushfan reports besides FCM's own.
const (
	CodeTimeout      = "TIMEOUT"        // the per-send timeout expired
	CodeNetwork      = "NETWORK_ERROR"  // no HTTP answer (connection refused, reset, ...)
	CodeUnknown      = "UNKNOWN"        // an error no rule recognises
	CodePanic        = "SENDER_PANIC"   // the Sender panicked
	CodeTemplate     = "TEMPLATE_ERROR" // the personalized message did not render
	CodeQuota        = "QUOTA_EXCEEDED"
	CodeUnavailable  = "UNAVAILABLE"
	CodeInternal     = "INTERNAL"
	CodeUnregistered = "UNREGISTERED"
	CodeInvalidArg   = "INVALID_ARGUMENT"
	CodeMismatch     = "SENDER_ID_MISMATCH"
	CodeThirdParty   = "THIRD_PARTY_AUTH_ERROR"
	CodeUnauthorized = "UNAUTHENTICATED"
	CodeForbidden    = "PERMISSION_DENIED"
	CodeNotFound     = "NOT_FOUND"
)

// SendError is a classified send outcome. Fake Senders return it directly;
// the FCM Sender's errors are turned into one by Classify.
type SendError struct {
	Class      Class
	Code       string
	RetryAfter time.Duration // server-requested wait (Retry-After), 0 if none
	Detail     string
	Err        error
}

func (e *SendError) Error() string {
	if e.Detail != "" {
		return e.Code + ": " + e.Detail
	}
	return e.Code
}

func (e *SendError) Unwrap() error { return e.Err }

// Classify is the one place that decides what an error from a Sender means.
// nil is Success.
func Classify(err error) SendError {
	if err == nil {
		return SendError{Class: Success}
	}
	var se *SendError
	if errors.As(err, &se) {
		return *se
	}
	detail := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return SendError{Class: Transient, Code: CodeTimeout, Detail: detail, Err: err}
	case errors.Is(err, errBudgetSpent):
		// The transport refused to let the SDK retry a network error past
		// the token's budget; the original error is wrapped.
		return SendError{Class: Transient, Code: CodeNetwork, Detail: detail, Err: err}
	case messaging.IsUnregistered(err):
		return SendError{Class: Dead, Code: CodeUnregistered, Detail: detail, Err: err}
	case messaging.IsSenderIDMismatch(err):
		return SendError{Class: Dead, Code: CodeMismatch, Detail: detail, Err: err}
	case messaging.IsInvalidArgument(err):
		// FCM says "The registration token is not a valid FCM registration
		// token" when the token is at fault; anything else is the message,
		// which would fail for every token.
		if isTokenCause(detail) {
			return SendError{Class: Dead, Code: CodeInvalidArg, Detail: detail, Err: err}
		}
		return SendError{Class: Fatal, Code: CodeInvalidArg, Detail: detail, Err: err}
	case messaging.IsQuotaExceeded(err), errorutils.IsResourceExhausted(err):
		// Both 429 shapes: the FcmError QUOTA_EXCEEDED and the project-quota
		// ErrorInfo (RATE_LIMIT_EXCEEDED), for which IsQuotaExceeded is false.
		return SendError{Class: Transient, Code: CodeQuota, RetryAfter: retryAfter(err), Detail: detail, Err: err}
	case messaging.IsUnavailable(err):
		return SendError{Class: Transient, Code: CodeUnavailable, RetryAfter: retryAfter(err), Detail: detail, Err: err}
	case messaging.IsInternal(err):
		return SendError{Class: Transient, Code: CodeInternal, RetryAfter: retryAfter(err), Detail: detail, Err: err}
	case messaging.IsThirdPartyAuthError(err):
		return SendError{Class: Fatal, Code: CodeThirdParty, Detail: detail, Err: err}
	case errorutils.IsUnauthenticated(err):
		return SendError{Class: Fatal, Code: CodeUnauthorized, Detail: detail, Err: err}
	case errorutils.IsPermissionDenied(err):
		return SendError{Class: Fatal, Code: CodeForbidden, Detail: detail, Err: err}
	case errorutils.IsNotFound(err):
		// A 404 without FcmError: the project itself does not exist.
		return SendError{Class: Fatal, Code: CodeNotFound, Detail: detail, Err: err}
	case errorutils.IsUnknown(err) && errorutils.HTTPResponse(err) == nil:
		// The SDK wraps transport errors as UNKNOWN with no HTTP response.
		return SendError{Class: Transient, Code: CodeNetwork, Detail: detail, Err: err}
	}
	return SendError{Class: Transient, Code: CodeUnknown, Detail: detail, Err: err}
}

func isTokenCause(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "registration token") || strings.Contains(m, "message.token")
}

// retryAfter reads Retry-After (delta-seconds or an HTTP date) from the
// response the SDK kept. The budget transport moves the original header to
// originalRetryAfter when it had to stop the SDK's own retries.
func retryAfter(err error) time.Duration {
	resp := errorutils.HTTPResponse(err)
	if resp == nil {
		return 0
	}
	return retryAfterHeader(resp.Header)
}

// retryAfterHeader reads the server's Retry-After, which the budget
// transport moves to originalRetryAfter when it stops the SDK's retries.
func retryAfterHeader(h http.Header) time.Duration {
	v := h.Get(originalRetryAfter)
	if v == "" {
		v = h.Get("Retry-After")
	}
	return parseRetryAfter(v, time.Now())
}

// maxRetryAfterSeconds bounds a Retry-After: a day, far beyond any retry window.
const maxRetryAfterSeconds = 24 * 60 * 60

// parseRetryAfter understands both forms RFC 9110 allows.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0
		}
		// Capped so the multiplication cannot overflow into a negative wait.
		return time.Duration(min(secs, maxRetryAfterSeconds)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfterSeconds*time.Second)
		}
	}
	return 0
}

// ErrFatal wraps the outcome that stopped a broadcast early.
type ErrFatal struct{ Outcome SendError }

func (e *ErrFatal) Error() string {
	return fmt.Sprintf("broadcast stopped: FCM answered %s, which every token would get: %s", e.Outcome.Code, e.Outcome.Detail)
}
