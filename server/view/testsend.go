package view

import "time"

// TestSend is the answer of POST /push/test and POST
// /push/broadcasts/{id}/test.
type TestSend struct {
	Results            []TestResult  `json:"results"`
	UsersWithoutTokens []SkippedUser `json:"users_without_tokens"`
	Succeeded          int           `json:"succeeded"`
	Failed             int           `json:"failed"`
}

// TestResult is one token's outcome. The token is shortened: a device
// token is a credential to a user's device and never appears whole.
type TestResult struct {
	Token       string  `json:"token"`
	TokenID     *uint64 `json:"token_id"`
	UserID      *uint64 `json:"user_id"`
	Platform    *string `json:"platform"`
	TokenStatus string  `json:"token_status"`
	Outcome     string  `json:"outcome"`
	Code        *string `json:"code"`
	Message     *string `json:"message"`
	MessageID   *string `json:"message_id"`
	Attempts    int     `json:"attempts"`
	Invalidated bool    `json:"invalidated"`
}

// SkippedUser is a user no token was sent to, and why; for one whose
// every token is invalidated, when the last one was and by which code.
type SkippedUser struct {
	UserID        uint64     `json:"user_id"`
	Reason        string     `json:"reason"`
	InvalidatedAt *time.Time `json:"invalidated_at,omitempty"`
	InvalidReason *string    `json:"invalid_reason,omitempty"`
}
