package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"pushfan/config"
)

// tokenSet checks bearer tokens in constant time: the presented token is
// hashed and compared with every configured hash, match or not, so timing
// reveals neither a prefix nor which token matched.
type tokenSet struct{ tokens []config.AdminToken }

func (ts tokenSet) match(token string) *config.AdminToken {
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

const tokenKey = "pushfan.token"

// requireBearer refuses requests without a token from ts (401) and GET-only
// tokens on other methods (403); it stores the matched token for handlers.
func requireBearer(ts tokenSet, realm string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if len(ts.tokens) == 0 {
				return unauthorized(c, realm, "no "+realm+" tokens are configured, so every request is refused")
			}
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			token, found := strings.CutPrefix(h, "Bearer ")
			if !found || token == "" {
				return unauthorized(c, realm, "send Authorization: Bearer <token>")
			}
			t := ts.match(strings.TrimSpace(token))
			if t == nil {
				return unauthorized(c, realm, "the bearer token is not valid")
			}
			m := c.Request().Method
			if t.Role == config.RoleViewer && m != http.MethodGet && m != http.MethodHead {
				return &APIError{Status: http.StatusForbidden, Code: "forbidden", Message: "token " + t.Name + " has the viewer role, which may only read; " + m + " needs a sender token"}
			}
			c.Set(tokenKey, t)
			return next(c)
		}
	}
}

// caller returns the admin token that authenticated the request.
func caller(c echo.Context) *config.AdminToken {
	t, _ := c.Get(tokenKey).(*config.AdminToken)
	return t
}

func unauthorized(c echo.Context, realm, msg string) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pushfan-`+realm+`"`)
	return &APIError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg}
}
