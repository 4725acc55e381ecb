package fcm

import "pushfan/fanout"

// FCM's error codes (the FcmError detail's errorCode, or the google.rpc
// status), and those this client adds.
const (
	CodeUnregistered = "UNREGISTERED"
	CodeInvalidArg   = "INVALID_ARGUMENT"
	CodeMismatch     = "SENDER_ID_MISMATCH"
	CodeUnavailable  = "UNAVAILABLE"
	CodeInternal     = "INTERNAL"
	CodeThirdParty   = "THIRD_PARTY_AUTH_ERROR"
	CodeUnauthorized = "UNAUTHENTICATED"
	CodeForbidden    = "PERMISSION_DENIED"
	CodeNotFound     = "NOT_FOUND"
	CodeNetwork      = "NETWORK_ERROR" // no HTTP answer (connection refused, reset, ...)
	CodeUnknown      = "UNKNOWN"       // an answer no rule recognises
)

// knownCodes are every error code pushfan reports: FCM's own, this
// client's, and the engine's (quota, timeouts, panics, templates).
var knownCodes = [...]string{
	CodeUnregistered, CodeInvalidArg, CodeMismatch, fanout.CodeQuota, CodeUnavailable,
	CodeInternal, CodeThirdParty, CodeUnauthorized, CodeForbidden, CodeNotFound,
	fanout.CodeTimeout, CodeNetwork, CodeUnknown, fanout.CodePanic, fanout.CodeTemplate, fanout.CodeMessage,
}

// KnownCodes lists every error code pushfan reports.
func KnownCodes() []string { return append([]string(nil), knownCodes[:]...) }

// IsKnownCode reports whether code is one pushfan reports.
func IsKnownCode(code string) bool {
	for _, k := range knownCodes {
		if k == code {
			return true
		}
	}
	return false
}
