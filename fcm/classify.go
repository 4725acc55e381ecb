package fcm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"pushfan/fanout"
	"pushfan/fcm/transport"

	"firebase.google.com/go/v4/errorutils"
)

// classify turns the SDK's error (nil: success) into an outcome. ctx is
// the send's context: when it ended, its cause says why (the engine's
// per-send timeout, or the budget transport spending the token's last
// request), whatever the SDK wrapped around it.
func classify(ctx context.Context, err error) fanout.Outcome {
	if err == nil {
		return fanout.Outcome{Class: fanout.Success}
	}
	detail := err.Error()
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errBudgetSpent) {
			// The transport refused to let the SDK retry a network error
			// past the token's budget.
			return fanout.Outcome{Class: fanout.Transient, Code: CodeNetwork, Detail: context.Cause(ctx).Error()}
		}
		return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout, Detail: detail}
	}
	if resp := errorutils.HTTPResponse(err); resp != nil {
		// An FCM answer: the SDK keeps the response, body included, so both
		// clients are classified by the one reading of the body below.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, transport.MaxErrorBody))
		out := classifyResponse(resp.StatusCode, resp.Header, body)
		out.Detail = detail
		return out
	}
	// With no HTTP response, the SDK's errors wrap a transport error
	// (refused, reset, timed out).
	return fanout.Outcome{Class: fanout.Transient, Code: CodeNetwork, Detail: detail}
}

// classifyResponse reads an FCM error response (google.rpc.Status JSON) as
// the SDK's messaging.Is* predicates do: by the FcmError detail's errorCode
// first, then by the status (or, without one, the HTTP status). Both
// clients' errors end here. The project-quota 429 carries an ErrorInfo and
// no FcmError: its status, RESOURCE_EXHAUSTED, makes it a quota answer.
func classifyResponse(status int, h http.Header, body []byte) fanout.Outcome {
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
	out := func(c fanout.Class, code string) fanout.Outcome {
		o := fanout.Outcome{Class: c, Code: code, Detail: detail}
		switch code {
		case fanout.CodeQuota, CodeUnavailable, CodeInternal: // the ones a retry waits for
			o.RetryAfter = retry
		}
		return o
	}
	switch {
	case fcmCode == CodeUnregistered:
		return out(fanout.Dead, CodeUnregistered)
	case fcmCode == CodeMismatch:
		return out(fanout.Dead, CodeMismatch)
	case fcmCode == CodeInvalidArg:
		if isTokenCause(detail) {
			return out(fanout.Dead, CodeInvalidArg)
		}
		return out(fanout.Fatal, CodeInvalidArg)
	case fcmCode == fanout.CodeQuota, platform == "RESOURCE_EXHAUSTED":
		return out(fanout.Transient, fanout.CodeQuota)
	case fcmCode == CodeUnavailable:
		return out(fanout.Transient, CodeUnavailable)
	case fcmCode == CodeInternal:
		return out(fanout.Transient, CodeInternal)
	case fcmCode == CodeThirdParty, fcmCode == "APNS_AUTH_ERROR":
		return out(fanout.Fatal, CodeThirdParty)
	case platform == CodeUnauthorized:
		return out(fanout.Fatal, CodeUnauthorized)
	case platform == CodeForbidden:
		return out(fanout.Fatal, CodeForbidden)
	case platform == CodeNotFound:
		return out(fanout.Fatal, CodeNotFound)
	}
	return out(fanout.Transient, CodeUnknown)
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
	v := h.Get("Retry-After")
	if orig, ok := h[http.CanonicalHeaderKey(originalRetryAfter)]; ok {
		v = "" // the budget transport replaced the server's (perhaps absent) value
		if len(orig) > 0 {
			v = orig[0]
		}
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
