package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"pushfan/server/proxies"
)

// authParts are who may call and from where: the admin, internal and
// metrics token sets; the failed-authentication budget per client address
// (bearer tokens and sign-ins); the trusted reverse proxies.
type authParts struct {
	admin, internal, metrics tokenSet
	failures                 *authFailures
	proxies                  proxies.Trusted
}

// tokenSet checks bearer tokens in constant time: the presented token is
// hashed and compared with every configured hash, match or not, so timing
// reveals neither a prefix nor which token matched.
// keys, when set (the admin realm's), are the API keys kept in the
// database, checked when no token matches.
type tokenSet struct {
	tokens []Token
	keys   Keys
}

func (ts tokenSet) match(token string) *Token {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.tokens {
		if subtle.ConstantTimeCompare(h[:], ts.tokens[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return &ts.tokens[found]
}

const principalKey = "pushfan.principal"

// requireBearer refuses requests without a token from ts or one of its
// API keys (401) and those whose role does not include the route's (403,
// neededRole); it stores the caller's principal for handlers.
// A presented token is an authentication attempt: a wrong one is charged
// to the client address's failure budget, shared with the console's
// sign-in, and once that is spent every bearer from the address is a 429.
func (s *Server) requireBearer(ts tokenSet, realm string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if len(ts.tokens) == 0 && ts.keys == nil {
				return unauthorized(c, realm, "no "+realm+" tokens are configured, so every request is refused")
			}
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			token, found := strings.CutPrefix(h, "Bearer ")
			if !found || token == "" {
				return unauthorized(c, realm, "send Authorization: Bearer <token>")
			}
			p, refusal, err := ts.principal(c.Request().Context(), strings.TrimSpace(token))
			if err != nil {
				return err // the database's, not the caller's: no failure charged
			}
			if err := s.auth.failures.admit(c, p != nil); err != nil {
				return err
			}
			if p == nil {
				s.log.WarnContext(c.Request().Context(), "bearer token refused", "realm", realm, "remote", c.RealIP(), "path", c.Path(), "why", refusal)
				return unauthorized(c, realm, refusal)
			}
			if err := authorize(c, p); err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// safeMethod: a request that changes nothing (no CSRF check).
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// requireAdmin lets in an admin bearer token or, without an Authorization
// header, a console session, whose changes must carry its CSRF token.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	bearer := s.requireBearer(s.auth.admin, "admin")(next)
	return func(c echo.Context) error {
		if s.console.sessions == nil || c.Request().Header.Get(echo.HeaderAuthorization) != "" {
			return bearer(c)
		}
		if _, err := c.Cookie(sessionCookie); err != nil {
			return bearer(c) // no session either: the bearer's 401
		}
		sess, p, err := s.session(c)
		if err != nil {
			return err
		}
		if p == nil {
			return unauthorized(c, "admin", "the console session has expired or ended; sign in again at /console/")
		}
		if !safeMethod(c.Request().Method) {
			if err := checkCSRF(c, sess); err != nil {
				return err
			}
		}
		if err := authorize(c, p); err != nil {
			return err
		}
		c.Set(principalKey, p)
		c.Set(sessionKey, sess)
		return next(c)
	}
}

// caller returns who the request acts for (nil on a route without
// authentication).
func caller(c echo.Context) *Principal {
	p, _ := c.Get(principalKey).(*Principal)
	return p
}

// callerName is the name of who the request acts for ("" for none).
func callerName(c echo.Context) string {
	if p := caller(c); p != nil {
		return p.Name
	}
	return ""
}

func unauthorized(c echo.Context, realm, msg string) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pushfan-`+realm+`"`)
	return &APIError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg}
}
