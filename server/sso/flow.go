package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"pushfan/model"
)

// StateStore keeps the sign-ins between their start and their callback
// where every instance sees them (package repository's Store): a state
// made on one replica is taken by the callback on another, once.
type StateStore interface {
	SaveOIDCState(ctx context.Context, st model.OIDCState) error
	TakeOIDCState(ctx context.Context, stateHash [32]byte) (model.OIDCState, bool, error)
}

// StateTTL is how long a person has at the provider's login page.
const StateTTL = 10 * time.Minute

// Begin starts a sign-in: a random state, nonce and PKCE verifier, stored
// in states with the hash of browser, a random value for the browser's
// cookie. It returns where to send the browser and that value.
func (c *Client) Begin(ctx context.Context, states StateStore, now time.Time) (authURL, browser string, err error) {
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	browser = random()
	if authURL, err = c.AuthURL(ctx, state, nonce, verifier); err != nil {
		return "", "", err
	}
	if err := states.SaveOIDCState(ctx, model.OIDCState{StateHash: sha256.Sum256([]byte(state)), BrowserHash: sha256.Sum256([]byte(browser)),
		Nonce: nonce, Verifier: verifier, ExpiresAt: now.Add(StateTTL)}); err != nil {
		return "", "", err
	}
	return authURL, browser, nil
}

// Finish takes the sign-in of state from states (once: a replay finds
// nothing), checks that browser (the cookie's value) started it,
// exchanges code, verifies the ID token and maps the person's groups to
// a role. A *Refusal says why a sign-in is refused; any other error is
// the server's (the database).
func (c *Client) Finish(ctx context.Context, states StateStore, state, code, browser string) (Identity, model.Role, error) {
	if state == "" || code == "" {
		return Identity{}, "", &Refusal{Code: "missing_parameter", Reason: "the callback needs the provider's code and state parameters"}
	}
	st, found, err := states.TakeOIDCState(ctx, sha256.Sum256([]byte(state)))
	if err != nil {
		return Identity{}, "", err
	}
	if !found {
		return Identity{}, "", &Refusal{Code: "state_unknown", Reason: "this sign-in's state is unknown, already used or expired (a replayed callback is refused): start again"}
	}
	if browser == "" || sha256.Sum256([]byte(browser)) != st.BrowserHash {
		return Identity{}, "", &Refusal{Code: "state_not_this_browser", Reason: "this sign-in was started in another browser (or its cookie expired): start again"}
	}
	id, err := c.Exchange(ctx, code, st.Verifier, st.Nonce)
	if err != nil {
		return Identity{}, "", err
	}
	role, ok := c.Role(id.Groups)
	if !ok {
		return Identity{}, "", &Refusal{Code: "no_mapped_group", Identity: id,
			Reason: "you are signed in at the provider, but none of your groups (" + strings.Join(id.Groups, ", ") + ") has a role in pushfan (oidc.roles)"}
	}
	return id, role, nil
}

// random is 32 random bytes, base64url without padding.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
