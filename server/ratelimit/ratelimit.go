// Package ratelimit holds the token buckets the server's budgets are made
// of: one bucket per key (an admin token's name, a client address), and
// the key a client address counts by.
package ratelimit

import (
	"container/list"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed holds one token bucket per key (an admin token's name, a
// client address), made on first use. MaxKeys bounds the memory: past it,
// the least recently used key's bucket is forgotten. (Forgetting them all
// would give every key a fresh budget: one address range with many keys,
// such as the 65536 /64s of an IPv6 /48, could reset everyone's.)
type Keyed struct {
	perMinute float64
	burst     int
	maxKeys   int
	mu        sync.Mutex
	byKey     map[string]*list.Element // of *entry, in lru
	lru       *list.List               // front: the most recently used
}

type entry struct {
	key string
	lim *rate.Limiter
}

// MaxKeys is how many keys a Keyed remembers.
const MaxKeys = 10000

// New is a Keyed of perMinute events a minute per key, burst at once.
func New(perMinute float64, burst int) *Keyed {
	return &Keyed{perMinute: perMinute, burst: max(1, burst), maxKeys: MaxKeys,
		byKey: map[string]*list.Element{}, lru: list.New()}
}

// bucket is key's limiter, made if need be; the caller holds k.mu. Every
// use, even a refused one, makes the key the most recently used.
func (k *Keyed) bucket(key string) *rate.Limiter {
	if el := k.byKey[key]; el != nil {
		k.lru.MoveToFront(el)
		return el.Value.(*entry).lim
	}
	for len(k.byKey) >= k.maxKeys {
		oldest := k.lru.Back()
		k.lru.Remove(oldest)
		delete(k.byKey, oldest.Value.(*entry).key)
	}
	b := &entry{key: key, lim: rate.NewLimiter(rate.Limit(k.perMinute/60), k.burst)}
	k.byKey[key] = k.lru.PushFront(b)
	return b.lim
}

// Reserve takes one event from key's bucket: the caller cancels the
// reservation when it must wait (Delay > 0). (Cancel gives nothing back
// once the reservation's time has come: a granted event stays spent.)
func (k *Keyed) Reserve(key string) *rate.Reservation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bucket(key).Reserve()
}

// Attempt decides an event that only costs when it fails: while key's
// bucket holds less than one event it answers how long until it does,
// whether or not ok; otherwise it takes one event if !ok and answers 0. It
// is one step under the lock, so parallel attempts get the budget and no
// more.
func (k *Keyed) Attempt(key string, ok bool) time.Duration {
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

// AddrKey is a per-address budget's key for a client address (the
// failure budget's, the events'): an IPv6 address counts by its /64,
// which one host can fill.
func AddrKey(addr string) string {
	if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	return addr
}
