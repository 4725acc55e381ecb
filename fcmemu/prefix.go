package fcmemu

import "strings"

// tokenOutcome is what a token's prefix asks for on a given attempt (1-based).
type tokenOutcome struct {
	code code // codeOK: no prefix outcome, carry on with the random error rates
	hang bool
}

// outcomeForToken maps the documented prefixes to outcomes. invalid- never gets here: token
// validation rejects it first.
func outcomeForToken(token string, attempt int64) tokenOutcome {
	if len(token) == 0 {
		return tokenOutcome{}
	}
	// A switch on the first byte keeps the common case (an ordinary token) to one comparison.
	switch token[0] {
	case 'u':
		if strings.HasPrefix(token, "unregistered-") {
			return tokenOutcome{code: codeUnregistered}
		}
		if strings.HasPrefix(token, "unavailable-") {
			return tokenOutcome{code: codeUnavailable}
		}
	case 'm':
		if strings.HasPrefix(token, "mismatch-") {
			return tokenOutcome{code: codeSenderIDMismatch}
		}
	case 'q':
		if strings.HasPrefix(token, "quota-") {
			return tokenOutcome{code: codeQuotaExceeded}
		}
	case 'i':
		if strings.HasPrefix(token, "internal-") {
			return tokenOutcome{code: codeInternal}
		}
	case 'a':
		if strings.HasPrefix(token, "auth-") {
			return tokenOutcome{code: codeThirdPartyAuth}
		}
	case 'h':
		if strings.HasPrefix(token, "hang-") {
			return tokenOutcome{hang: true}
		}
	case 'f':
		if k, o, ok := parseFlaky(token); ok && attempt <= k {
			return o
		}
	}
	return tokenOutcome{}
}

// parseFlaky parses flaky<K>x<KIND>-…, returning K and KIND's outcome.
func parseFlaky(token string) (k int64, o tokenOutcome, ok bool) {
	rest, found := strings.CutPrefix(token, "flaky")
	if !found {
		return 0, o, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' && i < 9 {
		k = k*10 + int64(rest[i]-'0')
		i++
	}
	if i == 0 || i >= len(rest) || rest[i] != 'x' {
		return 0, o, false
	}
	kind, _, found := strings.Cut(rest[i+1:], "-")
	if !found {
		return 0, o, false
	}
	switch kind {
	case "unavailable":
		o.code = codeUnavailable
	case "internal":
		o.code = codeInternal
	case "quota":
		o.code = codeQuotaExceeded
	case "unregistered":
		o.code = codeUnregistered
	case "invalid":
		o.code = codeInvalidArgument
	case "mismatch":
		o.code = codeSenderIDMismatch
	case "auth":
		o.code = codeThirdPartyAuth
	case "hang":
		o.hang = true
	default:
		return 0, o, false
	}
	return k, o, true
}
