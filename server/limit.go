package server

import (
	"math"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/server/apierror"
	"pushfan/server/ratelimit"
)

// rateLimited is the 429 for a spent budget: Retry-After in whole seconds,
// and msg + "; retry in N s".
func rateLimited(c echo.Context, wait time.Duration, msg string) error {
	return apierror.RateLimited(c.Response().Header(), wait, msg)
}

// submitLimiter limits a route per admin token: POST /push/broadcast (and
// resends), the test sends, the previews. One misbehaving client (a retry
// loop, a stuck button, a script typing) cannot flood FCM or the database.
type submitLimiter struct {
	what   string // what the route makes, for the 429's message
	tokens *ratelimit.Keyed
}

func newSubmitLimiter(perMinute float64, what string) *submitLimiter {
	// Burst: ten seconds' worth, at least one.
	return &submitLimiter{what: what, tokens: ratelimit.New(perMinute, int(math.Ceil(perMinute/6)))}
}

// middleware answers 429 with Retry-After when the caller's budget is spent.
func (l *submitLimiter) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t := caller(c)
		if t == nil {
			return next(c)
		}
		r := l.tokens.Reserve(t.budgetKey())
		if d := r.Delay(); d > 0 {
			r.Cancel()
			return rateLimited(c, d, "token "+t.Name+" submitted too many "+l.what)
		}
		return next(c)
	}
}
