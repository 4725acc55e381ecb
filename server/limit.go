package server

import (
	"container/list"
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
// the least recently used key's bucket is forgotten. (Forgetting them all
// would give every key a fresh budget: one address range with many keys,
// such as the 65536 /64s of an IPv6 /48, could reset everyone's.)
type keyedLimiters struct {
	perMinute float64
	burst     int
	maxKeys   int
	mu        sync.Mutex
	byKey     map[string]*list.Element // of *keyedBucket, in lru
	lru       *list.List               // front: the most recently used
}

type keyedBucket struct {
	key string
	lim *rate.Limiter
}

const maxKeys = 10000

func newKeyedLimiters(perMinute float64, burst int) *keyedLimiters {
	return &keyedLimiters{perMinute: perMinute, burst: max(1, burst), maxKeys: maxKeys,
		byKey: map[string]*list.Element{}, lru: list.New()}
}

// bucket is key's limiter, made if need be; the caller holds k.mu. Every
// use, even a refused one, makes the key the most recently used.
func (k *keyedLimiters) bucket(key string) *rate.Limiter {
	if el := k.byKey[key]; el != nil {
		k.lru.MoveToFront(el)
		return el.Value.(*keyedBucket).lim
	}
	for len(k.byKey) >= k.maxKeys {
		oldest := k.lru.Back()
		k.lru.Remove(oldest)
		delete(k.byKey, oldest.Value.(*keyedBucket).key)
	}
	b := &keyedBucket{key: key, lim: rate.NewLimiter(rate.Limit(k.perMinute/60), k.burst)}
	k.byKey[key] = k.lru.PushFront(b)
	return b.lim
}

// reserve takes one event from key's bucket: the caller cancels the
// reservation when it must wait (Delay > 0). (Cancel gives nothing back
// once the reservation's time has come: a granted event stays spent.)
func (k *keyedLimiters) reserve(key string) *rate.Reservation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bucket(key).Reserve()
}

// attempt decides an event that only costs when it fails: while key's
// bucket holds less than one event it answers how long until it does,
// whether or not ok; otherwise it takes one event if !ok and answers 0. It
// is one step under the lock, so parallel attempts get the budget and no
// more.
func (k *keyedLimiters) attempt(key string, ok bool) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.bucket(key)
	now := time.Now()
	if have := lim.TokensAt(now); have < 1 {
		return time.Duration((1 - have) / float64(lim.Limit()) * float64(time.Second))
	}
	if !ok {
		lim.AllowN(now, 1)
	}
	return 0
}

// rateLimited is the 429 for a spent budget: Retry-After in whole seconds,
// and msg + "; retry in N s".
func rateLimited(c echo.Context, wait time.Duration, msg string) error {
	secs := strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
	c.Response().Header().Set("Retry-After", secs)
	return &APIError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: msg + "; retry in " + secs + " s"}
}

// submitLimiter limits a route per admin token: POST /push/broadcast (and
// resends), the test sends, the previews. One misbehaving client (a retry
// loop, a stuck button, a script typing) cannot flood FCM or the database.
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
