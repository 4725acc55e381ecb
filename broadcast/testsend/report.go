package testsend

import (
	"context"
	"fmt"
	"time"

	"pushfan/repository"
)

// Token states in a TestResult.
const (
	TokenValid       = "valid"       // a device_tokens row, not invalidated
	TokenInvalidated = "invalidated" // a device_tokens row already invalidated
	TokenStale       = "stale"       // a device_tokens row not refreshed within PUSHFAN_STALE_AFTER
	TokenUnknown     = "unknown"     // no device_tokens row (a raw token)
)

// Reasons a user of a test send got nothing.
const (
	SkipUnknownUser   = "unknown_user"
	SkipPushDisabled  = "push_disabled"
	SkipNoValidTokens = "no_valid_tokens"
)

// TestResult is one token's outcome. Token is whole: the HTTP view
// shortens it.
type TestResult struct {
	Token   string
	TokenID uint64 // 0 when unknown
	UserID  uint64 // 0 when unknown
	State   string // TokenValid, TokenInvalidated, TokenStale, TokenUnknown
	// Platform is the token's (android, ios, web); "" when not known.
	Platform string
	// Succeeded, or Code and Message say why not.
	Succeeded bool
	Code      string
	Message   string
	MessageID string // FCM's name for the message, on success
	Attempts  int    // HTTP requests made
	// Invalidated: this send found the token dead and invalidated it.
	Invalidated bool
}

// SkippedUser is a user of a test send that no token was sent to.
type SkippedUser struct {
	UserID uint64
	Reason string // SkipUnknownUser, SkipPushDisabled, SkipNoValidTokens
	// With SkipNoValidTokens, when every token of the user is
	// invalidated: when the last one was, and by which code (zero when
	// not known, e.g. a stale token or a mapped table).
	InvalidatedAt time.Time
	InvalidReason string
}

// TestReport is a test send's answer.
type TestReport struct {
	Results            []TestResult
	UsersWithoutTokens []SkippedUser
}

// resolveUsers reads the users' valid tokens (as the audience rule does:
// a disabled user gets nothing) and reports those that have none.
func (ts *Tester) resolveUsers(ctx context.Context, store *repository.Store, ids []uint64) ([]TestResult, []SkippedUser, error) {
	dbctx, cancel := context.WithTimeout(ctx, ts.opt.DBTimeout)
	defer cancel()
	users, err := store.TestUsers(dbctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("test send: %w", err)
	}
	var results []TestResult
	var skipped []SkippedUser
	for _, u := range users {
		switch {
		case !u.Exists:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipUnknownUser})
		case !u.PushEnabled:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipPushDisabled})
		case len(u.Tokens) == 0:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipNoValidTokens, InvalidatedAt: u.InvalidatedAt, InvalidReason: u.InvalidReason})
		}
		if !u.Exists || !u.PushEnabled {
			continue
		}
		for _, t := range u.Tokens {
			results = append(results, TestResult{Token: t.Token, TokenID: t.TokenID, UserID: u.UserID, State: TokenValid, Platform: u.Platforms[t.TokenID]})
		}
	}
	if len(results) > MaxTestTokens {
		return nil, nil, fieldError("too_many_tokens", "user_ids", "these users have %d valid tokens; a test send goes to at most %d (name fewer users, or their tokens)", len(results), MaxTestTokens)
	}
	return results, skipped, nil
}

// resolveTokens looks raw tokens up. Every one is sent, known or not: an
// operator testing a device may hold a token pushfan has not seen yet.
func (ts *Tester) resolveTokens(ctx context.Context, store *repository.Store, tokens []string) ([]TestResult, error) {
	dbctx, cancel := context.WithTimeout(ctx, ts.opt.DBTimeout)
	defer cancel()
	known, err := store.LookupTokens(dbctx, tokens)
	if err != nil {
		return nil, fmt.Errorf("test send: %w", err)
	}
	results := make([]TestResult, len(tokens))
	for i, t := range tokens {
		results[i] = TestResult{Token: t, State: TokenUnknown}
		if k, ok := known[t]; ok {
			results[i].TokenID, results[i].UserID, results[i].State, results[i].Platform = k.TokenID, k.UserID, TokenValid, k.Platform
			switch {
			case k.Invalidated:
				results[i].State = TokenInvalidated
			case k.Stale:
				// Sent all the same, as an invalidated one is: the
				// operator holds the device and asked for this token.
				results[i].State = TokenStale
			}
		}
	}
	return results, nil
}
