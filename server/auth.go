package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// tokenSet checks bearer tokens in constant time: both sides are hashed to
// equal length and every configured token is compared, match or not, so
// timing reveals neither a prefix nor which token matched.
type tokenSet struct{ hashes [][sha256.Size]byte }

func newTokenSet(tokens []string) tokenSet {
	ts := tokenSet{}
	for _, t := range tokens {
		ts.hashes = append(ts.hashes, sha256.Sum256([]byte(t)))
	}
	return ts
}

func (ts tokenSet) match(token string) bool {
	h := sha256.Sum256([]byte(token))
	ok := 0
	for i := range ts.hashes {
		ok |= subtle.ConstantTimeCompare(h[:], ts.hashes[i][:])
	}
	return ok == 1
}

// requireBearer refuses requests without a token from ts.
func requireBearer(ts tokenSet, realm string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if len(ts.hashes) == 0 {
				return unauthorized(c, realm, "no "+realm+" tokens are configured, so every request is refused")
			}
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			token, found := strings.CutPrefix(h, "Bearer ")
			if !found || token == "" {
				return unauthorized(c, realm, "send Authorization: Bearer <token>")
			}
			if !ts.match(strings.TrimSpace(token)) {
				return unauthorized(c, realm, "the bearer token is not valid")
			}
			return next(c)
		}
	}
}

func unauthorized(c echo.Context, realm, msg string) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pushfan-`+realm+`"`)
	return &APIError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg}
}
