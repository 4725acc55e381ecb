package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"pushfan/internal/platform/logging"
	"pushfan/model"
	"pushfan/server/sso"
)

// Console sign-in through an OpenID Connect provider. GET
// /console/oidc/login stores a sign-in (state, nonce, PKCE verifier) in
// the database and sends the browser to the provider; the provider sends
// it back to GET /console/oidc/callback, which takes the sign-in (once:
// a replayed state finds nothing, on any replica), lets package sso
// exchange the code and verify the ID token, maps the person's groups to
// a role and opens the same console session as a token's sign-in.
//
// The browser holds a random value in a short-lived cookie (HttpOnly,
// SameSite=Lax: it must come back on the provider's top-level redirect,
// which Strict would drop) and the stored sign-in holds its hash: a
// state carried to another browser is refused. The state lives in the
// database, not in a signed cookie, so no key need be shared among the
// replicas and a state is usable once.

// OIDCStateStore keeps the sign-ins between their start and their
// callback where every instance sees them (package repository's Store).
type OIDCStateStore = sso.StateStore

// oidcParts are the console's OIDC sign-in: the relying party and where
// sign-ins wait for their callback; nil when not configured.
type oidcParts struct {
	rp     *sso.Client
	states OIDCStateStore
}

// WithOIDC turns on console sign-in through rp's provider, the sign-ins
// kept in states (console sessions must be on too: WithSessions).
func WithOIDC(rp *sso.Client, states OIDCStateStore) Option {
	return func(s *Server) { s.console.oidc = &oidcParts{rp: rp, states: states} }
}

// WithAuditor records the console's sign-ins (signin, signin.failed) in
// the audit trail.
func WithAuditor(a Auditor) Option { return func(s *Server) { s.audit = a } }

const (
	oidcCookie     = "pushfan_oidc"
	oidcCookiePath = "/console/oidc/"
)

// oidcLogin starts a sign-in: GET /console/oidc/login.
func (s *Server) oidcLogin(c echo.Context) error {
	o := s.console.oidc
	if o == nil || s.console.sessions == nil {
		return &APIError{Status: http.StatusNotFound, Code: "oidc_disabled", Message: "sign-in through an OIDC provider is not configured on this server (PUSHFAN_OIDC_ISSUER)"}
	}
	noStore(c)
	to, browser, err := o.rp.Begin(c.Request().Context(), o.states, s.now())
	if err != nil {
		return s.signInFailed(c, err)
	}
	c.SetCookie(&http.Cookie{Name: oidcCookie, Value: browser, Path: oidcCookiePath, MaxAge: int(sso.StateTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.auth.proxies.OverTLS(c.Request())})
	return c.Redirect(http.StatusFound, to)
}

// oidcCallback finishes a sign-in: GET /console/oidc/callback?code&state.
func (s *Server) oidcCallback(c echo.Context) error {
	o := s.console.oidc
	if o == nil || s.console.sessions == nil {
		return &APIError{Status: http.StatusNotFound, Code: "oidc_disabled", Message: "sign-in through an OIDC provider is not configured on this server (PUSHFAN_OIDC_ISSUER)"}
	}
	noStore(c)
	ctx := c.Request().Context()
	// The browser's cookie has done its work whatever happens next.
	c.SetCookie(&http.Cookie{Name: oidcCookie, Value: "", Path: oidcCookiePath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.auth.proxies.OverTLS(c.Request())})
	q := c.QueryParams()
	if e := q.Get("error"); e != "" {
		return s.signInFailed(c, &sso.Refusal{Code: "provider_refused", Reason: "the provider did not sign you in: " + e + " " + q.Get("error_description")})
	}
	browser := ""
	if ck, err := c.Cookie(oidcCookie); err == nil {
		browser = ck.Value
	}
	id, role, err := o.rp.Finish(ctx, o.states, q.Get("state"), q.Get("code"), browser)
	if err != nil {
		return s.signInFailed(c, err)
	}
	if err := s.auth.failures.admit(c, true); err != nil {
		return err
	}
	person := id.Actor()
	sess, err := s.openSession(c, func(sess *model.Session) { sess.Person, sess.Role = &person, role })
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "console sign-in", "person", person.ID, "name", person.Name, "role", role, "remote", c.RealIP())
	s.record(c, model.AuditEntry{Actor: person, Action: "signin", Target: "session",
		Detail: detail(map[string]any{"method": "oidc", "role": role, "groups": id.Groups, "expires_at": sess.ExpiresAt.UTC()})})
	return c.Redirect(http.StatusSeeOther, "/console/")
}

// signInFailed answers a refused sign-in: a page for a browser (the
// callback is a navigation), JSON for anything else, never a 500 for
// what the provider or the browser sent; it records signin.failed and
// charges the client address's failure budget.
func (s *Server) signInFailed(c echo.Context, err error) error {
	var r *sso.Refusal
	if !errors.As(err, &r) {
		return err
	}
	status := http.StatusUnauthorized
	if r.Code == "provider_unavailable" {
		status = http.StatusBadGateway
	}
	if admitErr := s.auth.failures.admit(c, false); admitErr != nil {
		return admitErr
	}
	actor := r.Identity.Actor()
	if r.Identity.Subject == "" {
		actor = model.Actor{Kind: model.ActorPerson, Name: r.Identity.Email}
	}
	s.log.WarnContext(c.Request().Context(), "console sign-in refused", "code", r.Code, "reason", r.Reason, "remote", c.RealIP())
	s.record(c, model.AuditEntry{Actor: actor, Action: "signin.failed", Target: "session",
		Detail: detail(map[string]any{"method": "oidc", "code": r.Code, "reason": r.Reason})})
	apiErr := &APIError{Status: status, Code: r.Code, Message: r.Reason}
	if !strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html") {
		return apiErr
	}
	c.Response().Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return sso.FailedPage.Execute(c.Response(), apiErr)
}

// record appends e to the audit trail, when there is one, with the
// request's address and id; a failure to record is logged (a sign-in's
// entry changes nothing else, so there is no transaction to fail with it).
func (s *Server) record(c echo.Context, e model.AuditEntry) {
	if s.audit == nil {
		return
	}
	e.At = s.now().UTC()
	e.IP = c.RealIP()
	e.RequestID = logging.RequestID(c.Request().Context())
	if err := s.audit.Record(c.Request().Context(), e); err != nil {
		s.log.ErrorContext(c.Request().Context(), "audit entry not recorded", "action", e.Action, "err", err)
	}
}

// detail is an audit entry's detail as JSON (its values always encode).
func detail(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
