package model

import "time"

// Session is an admin console sign-in. The browser holds the session id in
// a cookie; the server keeps only IDHash (SHA-256 of the id).
type Session struct {
	IDHash    [32]byte
	TokenHash [32]byte // SHA-256 of the admin token that signed in
	CSRFToken string   // sent back in X-CSRF-Token on every state change
	CreatedAt time.Time
	ExpiresAt time.Time
}
