package fcmemu

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// code is an answer the emulator gives to a send request. It indexes the stats counters, so
// the set is closed.
type code uint8

const (
	codeOK code = iota
	codeInvalidArgument
	codeUnregistered
	codeSenderIDMismatch
	codeQuotaExceeded     // 429, FcmError QUOTA_EXCEEDED (per target)
	codeRateLimitExceeded // 429, project-quota shape: ErrorInfo RATE_LIMIT_EXCEEDED, no FcmError
	codeUnavailable
	codeInternal
	codeThirdPartyAuth
	codeCanceled // the client went away before the answer; nothing was written
	numCodes
)

// codeSpec is how one code goes on the wire.
type codeSpec struct {
	name    string // key in Stats.ByCode; the FcmError errorCode where there is one
	http    int
	status  string // google.rpc.Code name
	message string // default error message, as FCM words it where known
}

// spec returns the wire description of c. A switch rather than a table keeps the package free
// of mutable globals.
func (c code) spec() codeSpec {
	switch c {
	case codeOK:
		return codeSpec{"OK", http.StatusOK, "OK", ""}
	case codeInvalidArgument:
		return codeSpec{"INVALID_ARGUMENT", http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument."}
	case codeUnregistered:
		return codeSpec{"UNREGISTERED", http.StatusNotFound, "NOT_FOUND", "Requested entity was not found."}
	case codeSenderIDMismatch:
		return codeSpec{"SENDER_ID_MISMATCH", http.StatusForbidden, "PERMISSION_DENIED", "SenderId mismatch"}
	case codeQuotaExceeded:
		return codeSpec{"QUOTA_EXCEEDED", http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Sending limit exceeded for the message target."}
	case codeRateLimitExceeded:
		return codeSpec{"RATE_LIMIT_EXCEEDED", http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com'."}
	case codeUnavailable:
		return codeSpec{"UNAVAILABLE", http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable."}
	case codeInternal:
		return codeSpec{"INTERNAL", http.StatusInternalServerError, "INTERNAL", "Internal error encountered."}
	case codeThirdPartyAuth:
		return codeSpec{"THIRD_PARTY_AUTH_ERROR", http.StatusUnauthorized, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service"}
	case codeCanceled:
		return codeSpec{"CANCELED", 499, "CANCELLED", "The client went away."}
	}
	return codeSpec{"UNKNOWN", http.StatusInternalServerError, "UNKNOWN", "Unknown error."}
}

// Type URLs of the google.rpc.Status details FCM sends.
const (
	typeFcmError   = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
	typeErrorInfo  = "type.googleapis.com/google.rpc.ErrorInfo"
	typeBadRequest = "type.googleapis.com/google.rpc.BadRequest"
)

// Wire types of google.rpc.Status and its details. Field order follows FCM's answers.
type (
	statusBody struct {
		Error statusError `json:"error"`
	}
	statusError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []any  `json:"details,omitempty"`
	}
	fcmErrorDetail struct {
		Type      string `json:"@type"`
		ErrorCode string `json:"errorCode"`
	}
	errorInfoDetail struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	}
	badRequestDetail struct {
		Type            string           `json:"@type"`
		FieldViolations []fieldViolation `json:"fieldViolations"`
	}
	fieldViolation struct {
		Field       string `json:"field,omitempty"`
		Description string `json:"description"`
	}
)

// errorBody renders the body FCM sends for c with the FcmError detail (every code except the
// project-quota one).
func errorBody(c code) []byte {
	s := c.spec()
	return mustJSON(statusBody{statusError{
		Code: s.http, Message: s.message, Status: s.status,
		Details: []any{fcmErrorDetail{typeFcmError, s.name}},
	}})
}

// invalidArgumentBody renders a 400 naming the broken rule: FcmError INVALID_ARGUMENT plus a
// BadRequest field violation on field, as FCM does.
func invalidArgumentBody(field, msg string) []byte {
	return mustJSON(statusBody{statusError{
		Code: http.StatusBadRequest, Message: msg, Status: "INVALID_ARGUMENT",
		Details: []any{
			fcmErrorDetail{typeFcmError, "INVALID_ARGUMENT"},
			badRequestDetail{typeBadRequest, []fieldViolation{{Field: field, Description: msg}}},
		},
	}})
}

// projectQuotaBody renders the project-level 429: an ErrorInfo detail and, deliberately, no
// FcmError, which is what makes messaging.IsQuotaExceeded false for it.
func projectQuotaBody(project string, limit int) []byte {
	s := codeRateLimitExceeded.spec()
	md := map[string]string{
		"service":      "fcm.googleapis.com",
		"quota_metric": "fcm.googleapis.com/fcm_send_requests",
		"quota_limit":  "SendRequestsPerMinutePerProject",
		"consumer":     "projects/" + project,
	}
	if limit > 0 {
		md["quota_limit_value"] = strconv.Itoa(limit)
	}
	return mustJSON(statusBody{statusError{
		Code: s.http, Message: s.message, Status: s.status,
		Details: []any{errorInfoDetail{typeErrorInfo, "RATE_LIMIT_EXCEEDED", "googleapis.com", md}},
	}})
}

// plainStatusBody renders a google.rpc.Status without details (routing errors).
func plainStatusBody(httpCode int, status, msg string) []byte {
	return mustJSON(statusBody{statusError{Code: httpCode, Message: msg, Status: status}})
}

// mustJSON marshals values built from strings, ints and maps of strings, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fcmemu: marshalling a static error body: " + err.Error())
	}
	return b
}

// Header values shared by every answer. Assigned directly to the header map to skip
// canonicalisation; each response gets its own slice because handlers downstream may append.
const contentTypeJSON = "application/json; charset=UTF-8"

// writeBody writes a complete JSON answer. retryAfter > 0 adds a Retry-After header in whole
// seconds.
func writeBody(w http.ResponseWriter, status int, body []byte, retryAfter int) {
	h := w.Header()
	h["Content-Type"] = []string{contentTypeJSON}
	if retryAfter > 0 {
		h["Retry-After"] = []string{strconv.Itoa(retryAfter)}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may be gone; nothing useful to do with the error
}

// writeStatus writes a detail-less google.rpc.Status error.
func writeStatus(w http.ResponseWriter, httpCode int, status, msg string) {
	writeBody(w, httpCode, plainStatusBody(httpCode, status, msg), 0)
}
