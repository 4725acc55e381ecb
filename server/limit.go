package server

import (
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// submitLimiter limits POST /push/broadcast (and POST /push/test) per
// admin token, so one misbehaving client (a retry loop, a stuck button)
// cannot flood FCM or the database with broadcasts or test sends.
type submitLimiter struct {
	perMinute float64
	what      string // what the route makes, for the 429's message
	mu        sync.Mutex
	byToken   map[string]*rate.Limiter
}

func newSubmitLimiter(perMinute float64, what string) *submitLimiter {
	return &submitLimiter{perMinute: perMinute, what: what, byToken: map[string]*rate.Limiter{}}
}

func (l *submitLimiter) limiter(name string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byToken[name]
	if lim == nil {
		// Burst: ten seconds' worth, at least one.
		burst := max(1, int(math.Ceil(l.perMinute/6)))
		lim = rate.NewLimiter(rate.Limit(l.perMinute/60), burst)
		l.byToken[name] = lim
	}
	return lim
}

// middleware answers 429 with Retry-After when the caller's budget is spent.
func (l *submitLimiter) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t := caller(c)
		if t == nil {
			return next(c)
		}
		r := l.limiter(t.Name).Reserve()
		if d := r.Delay(); d > 0 {
			r.Cancel()
			secs := int(math.Ceil(d.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			return &APIError{Status: http.StatusTooManyRequests, Code: "rate_limited",
				Message: "token " + t.Name + " submitted too many " + l.what + "; retry in " + strconv.Itoa(secs) + " s"}
		}
		return next(c)
	}
}
