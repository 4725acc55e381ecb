// Package sso is the console's OpenID Connect relying party: it sends a
// browser to the provider (the authorization-code flow with PKCE S256,
// state and nonce), takes the code back, and verifies the ID token (the
// issuer, the audience, the expiry, the signature from the provider's
// JWKS, which go-oidc's RemoteKeySet refetches when a token names a key it
// has not seen: key rotation; and the nonce, here). It maps the person's
// groups to a role. It keeps nothing between the two halves of a sign-in
// itself: a StateStore (the database) holds the state, the nonce and the
// PKCE verifier, so any replica finishes what another began, once.
package sso

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"pushfan/model"
)

// Config is the relying party's settings (package app builds it from a
// validated configuration).
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is
	// Issuer/.well-known/openid-configuration.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is PUSHFAN_PUBLIC_URL + /console/oidc/callback.
	RedirectURL string
	// RolesClaim is the ID token's claim that lists the person's groups.
	RolesClaim string
	// Roles maps a group to a role; AnyGroup ("*") matches anyone.
	Roles map[string]model.Role
	// HTTP reaches the provider; nil: a client with a 10 s timeout.
	HTTP *http.Client
}

// AnyGroup in Config.Roles matches anyone the provider signed in.
const AnyGroup = "*"

// Client is one provider's relying party. It discovers the provider at
// its first use, not at start-up, so a provider that is down when pushfan
// starts costs only the sign-ins tried while it is down.
type Client struct {
	cfg Config

	mu       sync.Mutex
	provider *oidc.Provider
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{cfg: cfg}
}

// ProviderName is what the console's button says: "Sign in with <host>".
func (c *Client) ProviderName() string {
	if u, err := url.Parse(c.cfg.Issuer); err == nil && u.Host != "" {
		return u.Hostname()
	}
	return c.cfg.Issuer
}

// discover returns the provider, fetching its discovery document once (a
// failed fetch is tried again at the next sign-in). go-oidc's key set
// fetches the JWKS with the client given here, never with a request's
// context.
func (c *Client) discover(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, c.cfg.HTTP), c.cfg.HTTP.Timeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, c.cfg.Issuer)
	if err != nil {
		return nil, &Refusal{Code: "provider_unavailable", Reason: fmt.Sprintf("the OIDC provider %s could not be reached: %v", c.cfg.Issuer, err), Err: err}
	}
	c.provider = p
	return p, nil
}

func (c *Client) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, RedirectURL: c.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// AuthURL is where to send the browser: the provider's authorization
// endpoint with state, nonce and the S256 challenge of verifier.
func (c *Client) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	p, err := c.discover(ctx)
	if err != nil {
		return "", err
	}
	return c.oauth(p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Identity is who the provider signed in, from the verified ID token.
type Identity struct {
	Subject string
	Email   string
	Name    string
	Groups  []string
}

// Actor is the person as the audit trail and the sessions name them: the
// subject, and the email (or the name, or the subject) to show.
func (id Identity) Actor() model.Actor {
	name := id.Email
	if name == "" {
		name = id.Name
	}
	if name == "" {
		name = id.Subject
	}
	return model.Actor{Kind: model.ActorPerson, ID: id.Subject, Name: name}
}

// Refusal is a sign-in refused: Code names why (snake_case), Reason says
// it in a sentence; Identity is what was known of the person (nothing
// before a verified token).
type Refusal struct {
	Code     string
	Reason   string
	Identity Identity
	Err      error
}

func (r *Refusal) Error() string { return r.Reason }
func (r *Refusal) Unwrap() error { return r.Err }

// Exchange trades code (with the PKCE verifier) for tokens at the
// provider, verifies the ID token and that it carries nonce, and returns
// the person.
func (c *Client) Exchange(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	p, err := c.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = oidc.ClientContext(ctx, c.cfg.HTTP)
	tok, err := c.oauth(p).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, &Refusal{Code: "code_exchange_failed", Reason: fmt.Sprintf("the provider refused the authorization code: %v", err), Err: err}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, &Refusal{Code: "no_id_token", Reason: "the provider's token answer has no id_token"}
	}
	return c.verify(ctx, p, raw, nonce)
}

// verify checks an ID token: go-oidc checks the signature (against the
// provider's JWKS, refetched for a key id it has not seen), the issuer,
// the audience (our client id) and the expiry; the nonce is checked here.
func (c *Client) verify(ctx context.Context, p *oidc.Provider, raw, nonce string) (Identity, error) {
	idt, err := p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		code := "id_token_invalid"
		if errors.As(err, &expired) {
			code = "id_token_expired"
		}
		return Identity{}, &Refusal{Code: code, Reason: fmt.Sprintf("the ID token was refused: %v", err), Err: err}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, &Refusal{Code: "id_token_invalid", Reason: fmt.Sprintf("the ID token's claims do not parse: %v", err), Err: err}
	}
	id := Identity{Subject: idt.Subject, Email: stringClaim(claims, "email"), Name: stringClaim(claims, "name"), Groups: listClaim(claims, c.cfg.RolesClaim)}
	if idt.Nonce == "" {
		return Identity{}, &Refusal{Code: "nonce_missing", Reason: "the ID token carries no nonce: it was not issued for this sign-in", Identity: id}
	}
	if idt.Nonce != nonce {
		return Identity{}, &Refusal{Code: "nonce_mismatch", Reason: "the ID token's nonce is not this sign-in's: it was issued for another one (replayed?)", Identity: id}
	}
	if id.Subject == "" {
		return Identity{}, &Refusal{Code: "id_token_invalid", Reason: "the ID token names no subject (sub)"}
	}
	return id, nil
}

func stringClaim(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// listClaim reads a claim that is a list of strings or one string
// (providers send either for a single group).
func listClaim(claims map[string]any, name string) []string {
	switch v := claims[name].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Role is the highest role among the person's groups that Roles maps
// (AnyGroup counting for anyone); ok is false when none is mapped.
func (c *Client) Role(groups []string) (role model.Role, ok bool) {
	consider := func(r model.Role) {
		if !ok || (r.Includes(role) && r != role) {
			role, ok = r, true
		}
	}
	if r, found := c.cfg.Roles[AnyGroup]; found {
		consider(r)
	}
	for _, g := range groups {
		if r, found := c.cfg.Roles[g]; found {
			consider(r)
		}
	}
	return role, ok
}

// FailedPage is the page a browser gets for a refused sign-in: the
// reason (Message) and its code (Code), and a way back to sign-in.
var FailedPage = template.Must(template.New("failed").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in refused · pushfan</title></head>
<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem">
<h1>Sign-in refused</h1>
<p id="reason">{{.Message}}</p>
<p><code id="code">{{.Code}}</code></p>
<p><a href="/console/">Back to sign-in</a></p>
</body></html>
`))
