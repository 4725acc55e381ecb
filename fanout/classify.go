package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"firebase.google.com/go/v4/errorutils"
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
	}
	if resp := errorutils.HTTPResponse(err); resp != nil {
		// An FCM answer: the SDK keeps the response, body included, so both
		// clients are classified by the one reading of the body below.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		se := classifyResponse(resp.StatusCode, resp.Header, body)
		se.Detail, se.Err = detail, err
		return se
	}
	if errorutils.IsUnknown(err) || errorutils.IsUnavailable(err) || errorutils.IsDeadlineExceeded(err) {
		// With no HTTP response, these are the SDK's wrappings of a
		// transport error (refused, reset, timed out).
		return SendError{Class: Transient, Code: CodeNetwork, Detail: detail, Err: err}
	}
	return SendError{Class: Transient, Code: CodeUnknown, Detail: detail, Err: err}
}

// classifyResponse reads an FCM error response (google.rpc.Status JSON, see
// DESIGN.md §3) as the SDK's messaging.Is* predicates do: by the FcmError
// detail's errorCode first, then by the status (or, without one, the HTTP
// status). Both clients' errors end here.
func classifyResponse(status int, h http.Header, body []byte) SendError {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Type      string `json:"@type"`
				ErrorCode string `json:"errorCode"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not Status JSON classifies by HTTP status
	fcmCode := ""
	for _, d := range e.Error.Details {
		if d.Type == "type.googleapis.com/google.firebase.fcm.v1.FcmError" {
			fcmCode = d.ErrorCode
			break
		}
	}
	platform := e.Error.Status
	if platform == "" {
		platform = statusFromHTTP(status)
	}
	detail := e.Error.Message
	if detail == "" {
		detail = "unexpected http response with status: " + strconv.Itoa(status) + "\n" + string(body)
	}
	retry := retryAfterHeader(h)
	out := func(c Class, code string) SendError {
		se := SendError{Class: c, Code: code, Detail: detail, Err: &HTTPError{Status: status, Body: string(body)}}
		switch code {
		case CodeQuota, CodeUnavailable, CodeInternal: // the ones Classify reads it for
			se.RetryAfter = retry
		}
		return se
	}
	switch {
	case fcmCode == CodeUnregistered:
		return out(Dead, CodeUnregistered)
	case fcmCode == CodeMismatch:
		return out(Dead, CodeMismatch)
	case fcmCode == CodeInvalidArg:
		if isTokenCause(detail) {
			return out(Dead, CodeInvalidArg)
		}
		return out(Fatal, CodeInvalidArg)
	case fcmCode == CodeQuota, platform == "RESOURCE_EXHAUSTED":
		return out(Transient, CodeQuota)
	case fcmCode == CodeUnavailable:
		return out(Transient, CodeUnavailable)
	case fcmCode == CodeInternal:
		return out(Transient, CodeInternal)
	case fcmCode == CodeThirdParty, fcmCode == "APNS_AUTH_ERROR":
		return out(Fatal, CodeThirdParty)
	case platform == CodeUnauthorized:
		return out(Fatal, CodeUnauthorized)
	case platform == CodeForbidden:
		return out(Fatal, CodeForbidden)
	case platform == CodeNotFound:
		return out(Fatal, CodeNotFound)
	}
	return out(Transient, CodeUnknown)
}

// statusFromHTTP is the google.rpc code the SDK assumes for an HTTP status
// when the body names none.
func statusFromHTTP(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusInternalServerError:
		return CodeInternal
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	return "UNKNOWN"
}

func isTokenCause(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "registration token") || strings.Contains(m, "message.token")
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
