package server

import (
	"crypto/sha256"
	"time"

	"pushfan/model"
)

// Config is the API's own settings: its listeners, tokens, timeouts and
// limits. Package app builds it once from the deployment's configuration
// (which has validated every value); what the API shows of the domain
// (apps, audiences, jobs) comes through Domain instead.
type Config struct {
	// Addr is the API's listener (PUSHFAN_HTTP_ADDR).
	Addr string
	// MetricsAddr is a listener of its own for GET /metrics and the
	// profiles (PUSHFAN_METRICS_ADDR); "": none (see MetricsServer).
	MetricsAddr string
	Tokens      Tokens
	Timeouts    Timeouts
	Limits      Limits
	// SessionTTL is how long a console sign-in lasts: the cookie's and
	// the stored session's lifetime.
	SessionTTL time.Duration
	// DisableTokenSignIn turns off the console's sign-in with an admin
	// token (PUSHFAN_TOKEN_SIGNIN=false): people sign in through the OIDC
	// provider only. Bearer tokens on the API are not affected.
	DisableTokenSignIn bool
	// TrustedProxies are the CIDRs of the reverse proxies whose
	// X-Forwarded-For and X-Forwarded-Proto are believed (proxy.go).
	TrustedProxies []string
	// EventOrigins may post engagement events from a browser (CORS on
	// /v1/; "*" is any); empty: no CORS.
	EventOrigins []string
}

// Tokens are who may call the API.
type Tokens struct {
	// Admin are the parsed PUSHFAN_ADMIN_TOKENS: /push/* and the console.
	// None: every such request is refused.
	Admin []Token
	// Internal is the bearer of /internal/* (an external cron); "":
	// refused.
	Internal string
	// Metrics may read GET /metrics and nothing else (the admin tokens
	// may too); "": only the admin tokens, and the metrics listener is
	// open to whoever reaches it.
	Metrics string
}

// Roles a token can have (model.Role; see neededRole for what each may
// do).
const (
	RoleViewer   = model.RoleViewer
	RoleSender   = model.RoleSender
	RoleApprover = model.RoleApprover
	RoleAdmin    = model.RoleAdmin
)

// Token is one admin token as the API checks it. Only the SHA-256 of its
// secret is held.
type Token struct {
	Name string
	Role model.Role
	Hash [sha256.Size]byte
	// Apps are the apps the token may use; nil: every app.
	Apps []string
}

// Timeouts bound every connection and every wait, so that no client can
// hold a connection, and no request the database, forever.
type Timeouts struct {
	// Read, ReadHeader, Write and Idle are the http.Server's.
	Read, ReadHeader, Write, Idle time.Duration
	// Shutdown bounds ending the live-watch streams when the listener
	// shuts down.
	Shutdown time.Duration
	// Wait is how long a submit (or resend) with wait, and a test send,
	// may take before the answer: below Write, so it can be written.
	Wait time.Duration
	// DB is one database call's deadline (PUSHFAN_DB_TIMEOUT): the
	// cluster view's; an audience preview gets six of them.
	DB time.Duration
}

// Limits are the request budgets.
type Limits struct {
	// Body is the largest request body, in bytes.
	Body int64
	// SubmitsPerMinute (broadcasts and resends), TestSendsPerMinute and
	// PreviewsPerMinute are per admin token.
	SubmitsPerMinute, TestSendsPerMinute, PreviewsPerMinute float64
	// SignInFailuresPerMinute are the failed authentications per client
	// address: wrong bearer tokens and failed console sign-ins together.
	SignInFailuresPerMinute float64
	// EventsPerAddress is how many event posts a second one client
	// address may make (a burst of twice that).
	EventsPerAddress float64
}
