package server

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// keyedLimiters holds one token bucket per key (an admin token's name, a
// client address), made on first use. maxKeys bounds the memory: past it,
// buckets that have refilled are forgotten, and if that frees nothing, all
// are (many keys at once get a fresh budget each either way).
type keyedLimiters struct {
	perMinute float64
	burst     int
	mu        sync.Mutex
	byKey     map[string]*rate.Limiter
}

const maxKeys = 10000

func newKeyedLimiters(perMinute float64, burst int) *keyedLimiters {
	return &keyedLimiters{perMinute: perMinute, burst: max(1, burst), byKey: map[string]*rate.Limiter{}}
}

// reserve takes one event from key's bucket: the caller cancels the
// reservation when it must wait (Delay > 0), or to give the event back.
func (k *keyedLimiters) reserve(key string) *rate.Reservation {
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.byKey[key]
	if lim == nil {
		if len(k.byKey) >= maxKeys {
			for key, l := range k.byKey {
				if l.Tokens() >= float64(l.Burst()) {
					delete(k.byKey, key)
				}
			}
			if len(k.byKey) >= maxKeys {
				clear(k.byKey)
			}
		}
		lim = rate.NewLimiter(rate.Limit(k.perMinute/60), k.burst)
		k.byKey[key] = lim
	}
	return lim.Reserve()
}

// rateLimited is the 429 for a spent budget: Retry-After in whole seconds,
// and msg + "; retry in N s".
func rateLimited(c echo.Context, wait time.Duration, msg string) error {
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	c.Response().Header().Set("Retry-After", secs)
	return &APIError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: msg + "; retry in " + secs + " s"}
}

// submitLimiter limits POST /push/broadcast (and POST /push/test) per
// admin token, so one misbehaving client (a retry loop, a stuck button)
// cannot flood FCM or the database with broadcasts or test sends.
type submitLimiter struct {
	what   string // what the route makes, for the 429's message
	tokens *keyedLimiters
}

func newSubmitLimiter(perMinute float64, what string) *submitLimiter {
	// Burst: ten seconds' worth, at least one.
	return &submitLimiter{what: what, tokens: newKeyedLimiters(perMinute, int(math.Ceil(perMinute/6)))}
}

// middleware answers 429 with Retry-After when the caller's budget is spent.
func (l *submitLimiter) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t := caller(c)
		if t == nil {
			return next(c)
		}
		r := l.tokens.reserve(t.Name)
		if d := r.Delay(); d > 0 {
			r.Cancel()
			return rateLimited(c, d, "token "+t.Name+" submitted too many "+l.what)
		}
		return next(c)
	}
}
