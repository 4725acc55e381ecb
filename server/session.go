package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/model"
)

// The admin console signs in with an admin token and then holds a session
// cookie instead of the token: the token never sits in the browser's
// storage, where any script on the page could read it. The cookie is
// HttpOnly (scripts cannot read it either) and SameSite=Strict (other sites
// cannot send it); on top of that every state-changing request must echo
// the session's CSRF token in a header, which only the console's own page
// can read (from GET /console/api/session).

// SessionStore keeps console sessions where every instance sees them
// (package repository's Store), so a sign-out ends a session everywhere.
type SessionStore interface {
	CreateSession(ctx context.Context, s model.Session) error
	Session(ctx context.Context, idHash [32]byte) (model.Session, bool, error)
	DeleteSession(ctx context.Context, idHash [32]byte) error
}

// WithSessions turns on console sign-in with sessions kept in st.
func WithSessions(st SessionStore) Option { return func(s *Server) { s.console.sessions = st } }

const (
	sessionCookie = "pushfan_session"
	csrfHeader    = "X-CSRF-Token"
	sessionKey    = "pushfan.session"
)

// sessionView is the answer of the session routes. A browser that is not
// signed in gets only signed_in false (a 200: the console asks on every
// load, and an expected answer is not an error in the browser's console).
type sessionView struct {
	SignedIn bool `json:"signed_in"`
	// Kind is who signed in: a token or a person (model.ActorKind).
	Kind      string     `json:"kind,omitempty"`
	Name      string     `json:"name,omitempty"`
	Role      string     `json:"role,omitempty"`
	CSRFToken string     `json:"csrf_token,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Apps are the apps the token is limited to (absent: every app).
	Apps []string `json:"apps,omitempty"`
	// SignIn says, to a browser not signed in, how it may sign in.
	SignIn *signInView `json:"sign_in,omitempty"`
}

// signInView is how the console's sign-in page may sign in: with a token
// (unless PUSHFAN_TOKEN_SIGNIN=false) and through the OIDC provider
// (named, when configured).
type signInView struct {
	Token bool `json:"token"`
	// OIDC names the provider ("Sign in with <provider>"); absent: none.
	OIDC *oidcView `json:"oidc,omitempty"`
}

type oidcView struct {
	Provider string `json:"provider"`
	LoginURL string `json:"login_url"`
}

func (s *Server) signInView() *signInView {
	v := &signInView{Token: !s.cfg.DisableTokenSignIn}
	if o := s.console.oidc; o != nil {
		v.OIDC = &oidcView{Provider: o.rp.ProviderName(), LoginURL: "/console/oidc/login"}
	}
	return v
}

func viewSession(p *Principal, sess *model.Session) sessionView {
	exp := sess.ExpiresAt.UTC()
	return sessionView{SignedIn: true, Kind: string(p.Kind), Name: p.Name, Role: string(p.Role), CSRFToken: sess.CSRFToken, ExpiresAt: &exp, Apps: p.Apps}
}

// randomToken is 32 random bytes, base64url without padding (43 chars).
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// signIn exchanges an admin token for a session: POST /console/api/session
// {"token": "..."}. Every attempt that does not sign in (a wrong token, a
// bad body) is charged to the client address's failure budget, which
// bearer tokens share (authFailures), in one step with the check, so
// parallel guesses are limited as well as sequential ones; a success costs
// nothing.
func (s *Server) signIn(c echo.Context) error {
	if s.console.sessions == nil {
		return &APIError{Status: http.StatusNotFound, Code: "sessions_disabled", Message: "console sign-in is not configured on this server"}
	}
	noStore(c)
	if s.cfg.DisableTokenSignIn {
		return &APIError{Status: http.StatusForbidden, Code: "token_signin_disabled",
			Message: "signing in to the console with a token is turned off (PUSHFAN_TOKEN_SIGNIN=false): sign in through the OIDC provider at /console/oidc/login"}
	}
	// JSON only, from this origin: a form on another site cannot sign a
	// browser in (login CSRF) — it can send neither this Content-Type
	// without a preflight nor a same-origin Sec-Fetch-Site.
	if ct := c.Request().Header.Get(echo.HeaderContentType); !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return badRequest("invalid_content_type", "Content-Type", "sign in with Content-Type: application/json, got %q", ct)
	}
	if err := sameOrigin(c); err != nil {
		return err
	}
	var req struct {
		Token string `json:"token"`
	}
	bad := decodeStrict(c.Request().Body, &req)
	var t *Token
	if bad == nil && req.Token != "" {
		t = s.auth.admin.match(req.Token)
	}
	if err := s.auth.failures.admit(c, t != nil); err != nil {
		return err
	}
	switch {
	case bad != nil:
		return bad
	case req.Token == "":
		return badRequest("missing_field", "token", "token is required: paste an admin token (PUSHFAN_ADMIN_TOKENS)")
	case t == nil:
		s.log.WarnContext(c.Request().Context(), "console sign-in refused", "remote", c.RealIP())
		return &APIError{Status: http.StatusUnauthorized, Code: "unauthorized", Field: "token", Message: "that is not a valid admin token"}
	}
	sess, err := s.openSession(c, func(sess *model.Session) { sess.TokenHash = t.Hash })
	if err != nil {
		return err
	}
	p := t.principal()
	s.log.InfoContext(c.Request().Context(), "console sign-in", "token", t.Name, "remote", c.RealIP())
	s.record(c, model.AuditEntry{Actor: p.Actor, Action: "signin", Target: "session",
		Detail: detail(map[string]any{"method": "token", "role": p.Role, "expires_at": sess.ExpiresAt.UTC()})})
	return c.JSON(http.StatusOK, viewSession(p, sess))
}

// openSession opens a console session for the browser (a token's or a
// person's, as who fills it in) and sets its cookie. Signing in again
// replaces the browser's old session, on the server too.
func (s *Server) openSession(c echo.Context, who func(*model.Session)) (*model.Session, error) {
	ctx := c.Request().Context()
	if old, _, err := s.session(c); err == nil && old != nil {
		if err := s.console.sessions.DeleteSession(ctx, old.IDHash); err != nil {
			return nil, err
		}
		s.console.watch.EndSession(old.IDHash)
	}
	id := randomToken()
	now := s.now().UTC()
	sess := model.Session{IDHash: sha256.Sum256([]byte(id)), CSRFToken: randomToken(), CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}
	who(&sess)
	if err := s.console.sessions.CreateSession(ctx, sess); err != nil {
		return nil, err
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: id, Path: "/", Expires: sess.ExpiresAt,
		MaxAge: int(s.cfg.SessionTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.auth.proxies.OverTLS(c.Request())})
	return &sess, nil
}

// noStore keeps session answers (they carry the CSRF token) out of caches.
func noStore(c echo.Context) { c.Response().Header().Set(echo.HeaderCacheControl, "no-store") }

// whoAmI answers the current session (GET /console/api/session), or
// signed_in false: a page reload gets its CSRF token back from here.
func (s *Server) whoAmI(c echo.Context) error {
	noStore(c)
	sess, p, err := s.session(c)
	if err != nil {
		return err
	}
	if p == nil {
		return c.JSON(http.StatusOK, sessionView{SignIn: s.signInView()})
	}
	return c.JSON(http.StatusOK, viewSession(p, sess))
}

// signOut ends the session on the server (DELETE /console/api/session,
// CSRF-checked like every other change) and clears the cookie.
func (s *Server) signOut(c echo.Context) error {
	noStore(c)
	clearCookie := func() {
		c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: s.auth.proxies.OverTLS(c.Request())})
	}
	sess, t, err := s.session(c)
	if err != nil {
		return err
	}
	if t == nil {
		clearCookie() // a stale cookie goes too
		return &APIError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "not signed in, or the session has ended"}
	}
	if err := checkCSRF(c, sess); err != nil {
		return err
	}
	if err := s.console.sessions.DeleteSession(c.Request().Context(), sess.IDHash); err != nil {
		return err
	}
	s.console.watch.EndSession(sess.IDHash)
	audit.SetActor(c.Request().Context(), t.Actor) // who signed out, for the entry
	clearCookie()
	return c.NoContent(http.StatusNoContent)
}

// session returns the request's live session and who it stands for;
// (nil, nil, nil) when there is none, it has expired, or its token is no
// longer configured (removing or rotating a token ends its sessions). A
// person's session carries the person and their role (every app).
func (s *Server) session(c echo.Context) (*model.Session, *Principal, error) {
	if s.console.sessions == nil {
		return nil, nil, nil
	}
	ck, err := c.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil, nil
	}
	sess, found, err := s.console.sessions.Session(c.Request().Context(), sha256.Sum256([]byte(ck.Value)))
	if err != nil || !found {
		return nil, nil, err
	}
	if sess.Person != nil {
		return &sess, &Principal{Actor: *sess.Person, Role: sess.Role}, nil
	}
	for i := range s.auth.admin.tokens {
		if s.auth.admin.tokens[i].Hash == sess.TokenHash {
			return &sess, s.auth.admin.tokens[i].principal(), nil
		}
	}
	return nil, nil, nil
}

// checkCSRF refuses a state change without the session's CSRF token, or
// from another site.
func checkCSRF(c echo.Context, sess *model.Session) error {
	got := c.Request().Header.Get(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRFToken)) != 1 {
		return &APIError{Status: http.StatusForbidden, Code: "csrf_failed",
			Message: "a console session must send its CSRF token in the " + csrfHeader + " header on every change (GET /console/api/session gives it)"}
	}
	return sameOrigin(c)
}

// sameOrigin refuses a request a browser marks as sent from another site
// or origin (Sec-Fetch-Site). It needs no idea of the public host name,
// which a reverse proxy may rewrite; clients that send no such header
// (curl, old browsers) rely on the CSRF token and SameSite=Strict.
func sameOrigin(c echo.Context) error {
	switch site := c.Request().Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return nil
	default:
		return &APIError{Status: http.StatusForbidden, Code: "csrf_failed", Message: "the browser says this request comes from another origin (Sec-Fetch-Site: " + site + ")"}
	}
}
