package fcmemu

import (
	"sync"
	"sync/atomic"
	"time"
)

// Instants on the hot path are nanoseconds since the emulator's epoch, read from the monotonic
// clock (time.Since), so they fit in atomics and do not jump with the wall clock.

// ceilSeconds converts a wait to the whole seconds of a Retry-After header, rounding up so that
// a client honouring it never comes back early, and never less than 1.
func ceilSeconds(ns int64) int {
	s := (ns + int64(time.Second) - 1) / int64(time.Second)
	return int(max(s, 1))
}

// stormState is one arming of the storm. A new one replaces it on Reset or when StormAfter or
// StormFor change, which is what re-arms the storm.
type stormState struct {
	after   int64
	dur     int64 // ns; 0 disables
	base    int64 // accepted count when armed
	started atomic.Int64
	// started is 0 until the storm starts, then its start instant + 1 (so an instant of 0 is
	// representable).
}

func newStorm(cfg *Config, acceptedNow int64) *stormState {
	return &stormState{after: int64(cfg.StormAfter), dur: int64(cfg.StormFor), base: acceptedNow}
}

// check reports whether now is inside the storm, starting it if enough sends were accepted, and
// the instant it ends. startedNow is true for the one caller that started it.
func (s *stormState) check(now, accepted int64) (end int64, in, startedNow bool) {
	if s.dur <= 0 {
		return 0, false, false
	}
	st := s.started.Load()
	if st == 0 {
		if accepted-s.base < s.after {
			return 0, false, false
		}
		startedNow = s.started.CompareAndSwap(0, now+1)
		st = s.started.Load()
	}
	end = st - 1 + s.dur
	return end, now < end, startedNow
}

// window returns the storm's start and end instants, ok false if it has not started.
func (s *stormState) window() (start, end int64, ok bool) {
	st := s.started.Load()
	if st == 0 {
		return 0, 0, false
	}
	return st - 1, st - 1 + s.dur, true
}

// quotaState is the project quota's fixed window. A mutex is fine here: it is taken only when a
// quota is configured, for a few nanoseconds, and a lock-free version of "reset the window and
// the count together" would need the same serialisation anyway.
type quotaState struct {
	mu    sync.Mutex
	start int64 // window start; valid when open
	open  bool
	used  int
}

// take consumes one unit at instant now. When the window is full it returns the instant the
// window refills.
func (q *quotaState) take(now int64, limit int, window time.Duration) (refill int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open || now-q.start >= int64(window) {
		q.start, q.used, q.open = now, 0, true
	}
	if q.used < limit {
		q.used++
		return 0, true
	}
	return q.start + int64(window), false
}

func (q *quotaState) reset() {
	q.mu.Lock()
	q.open, q.used = false, 0
	q.mu.Unlock()
}

// backoffWindow is a span during which a request for the whole project ignores an announced
// Retry-After.
type backoffWindow struct{ start, end int64 }

// projectBackoff tracks the union of the windows announced by project 429s (quota, storm). A
// window runs from the 429 (plus grace) to the instant the quota refills or the storm ends, not
// to the 429's Retry-After instant: Retry-After is that instant rounded up to whole seconds,
// so a client honouring any one 429 arrives after the refill, whereas later 429s' rounded
// instants would otherwise flag a client that honoured an earlier one. A storm answers thousands
// of 429s pointing at the same instant, so the common update is a no-op that allocates nothing.
type projectBackoff struct{ w atomic.Pointer[backoffWindow] }

// announce records a project 429 sent at instant sent, for a shortage that ends at until.
// Arrivals within grace after sent are not counted (see Config.BackoffGrace).
func (b *projectBackoff) announce(sent, until, grace int64) {
	from := sent + grace
	if from >= until {
		return
	}
	for {
		old := b.w.Load()
		nw := backoffWindow{from, until}
		if old != nil && from <= old.end { // overlaps the current window: extend it
			nw = backoffWindow{min(old.start, from), max(old.end, until)}
			if nw == *old {
				return
			}
		}
		if b.w.CompareAndSwap(old, &nw) {
			return
		}
	}
}

// during reports whether a request arriving at t ignores an announced project Retry-After.
func (b *projectBackoff) during(t int64) bool {
	w := b.w.Load()
	return w != nil && t >= w.start && t < w.end
}
