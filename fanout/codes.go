package fanout

// knownCodes are every error code pushfan reports: FCM's own and those the
// engine adds (timeouts, network errors, panics, templates).
var knownCodes = [...]string{
	CodeUnregistered, CodeInvalidArg, CodeMismatch, CodeQuota, CodeUnavailable,
	CodeInternal, CodeThirdParty, CodeUnauthorized, CodeForbidden, CodeNotFound,
	CodeTimeout, CodeNetwork, CodeUnknown, CodePanic, CodeTemplate,
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
