package server

import (
	"github.com/labstack/echo/v4"

	"pushfan/server/ratelimit"
)

// authFailures is the one budget of failed authentications per client
// address, shared by every way in: a wrong bearer token on any route (the
// admin API, /internal, /metrics) and a failed console sign-in
// (PUSHFAN_SIGNIN_FAILURES_PER_MINUTE, with a minute's worth of burst).
// Once it is spent, every attempt from the address is refused with a 429
// until it refills, a right token too: answering a right token would tell
// a guesser which guess was right. A success costs nothing, and gives back
// nothing of the earlier failures.
type authFailures struct{ addrs *ratelimit.Keyed }

func newAuthFailures(perMinute float64) *authFailures {
	return &authFailures{addrs: ratelimit.New(perMinute, int(perMinute))}
}

// admit decides an attempt from the request's client address whose
// credential matched (ok) or not: a 429 while the address's budget is
// spent, else nil, having charged a failure.
func (f *authFailures) admit(c echo.Context, ok bool) error {
	if wait := f.addrs.Attempt(ratelimit.AddrKey(c.RealIP()), ok); wait > 0 {
		return rateLimited(c, wait, "too many failed authentications (wrong tokens or sign-ins) from this address")
	}
	return nil
}
