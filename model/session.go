package model

import "time"

// Session is an admin console sign-in. The browser holds the session id in
// a cookie; the server keeps only IDHash (SHA-256 of the id).
//
// A token's session names its token (TokenHash): the token's name and role
// are read from the configuration at every request, so removing the token
// ends the session. A person's session (signed in through the OIDC
// provider) has no token: it carries the person and the role their groups
// mapped to at sign-in, and ends when it expires or they sign out.
type Session struct {
	IDHash    [32]byte
	TokenHash [32]byte // SHA-256 of the admin token that signed in; zero for a person
	CSRFToken string   // sent back in X-CSRF-Token on every state change
	CreatedAt time.Time
	ExpiresAt time.Time
	// Person is who signed in through the provider (Kind person); nil for
	// a token's session.
	Person *Actor
	// Role is the person's role (empty for a token's: the token's own).
	Role Role
}

// OIDCState is one sign-in through the OIDC provider between its start
// (GET /console/oidc/login) and its callback, kept in the database so that
// any replica can finish what another began, and taken once: a replayed
// state finds nothing.
type OIDCState struct {
	// StateHash is the SHA-256 of the state parameter sent to the
	// provider; the state itself is only in the URL and the browser.
	StateHash [32]byte
	// BrowserHash is the SHA-256 of the random value in the browser's
	// short-lived cookie: the callback must come from the browser that
	// started (a state carried to another browser is refused).
	BrowserHash [32]byte
	// Nonce is what the ID token must carry back; Verifier is the PKCE
	// code verifier the token request proves.
	Nonce, Verifier string
	ExpiresAt       time.Time
}
