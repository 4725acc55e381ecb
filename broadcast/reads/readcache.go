package reads

import (
	"context"
	"sync"
	"time"

	"pushfan/model"
)

// readCache keeps recently read broadcasts, and their engagement, for GET
// /push/broadcasts/{id}. Admin consoles poll a running broadcast several
// times a second, often from many tabs; each poll was MySQL queries (the
// row, then the engagement counts and the time-to-open histogram) on the
// machine that is also sending. A quarter second old is as good to a
// person watching a progress bar, and the sends keep their CPU.
type readCache struct {
	rows       ttlMap[*model.Broadcast] // shared, read-only
	engagement ttlMap[model.Engagement]
}

func newReadCache(ttl time.Duration) readCache {
	return readCache{rows: ttlMap[*model.Broadcast]{ttl: ttl}, engagement: ttlMap[model.Engagement]{ttl: ttl}}
}

func (c *readCache) get(id uint64, now time.Time) (*model.Broadcast, bool) {
	return c.rows.get(id, now)
}
func (c *readCache) put(b *model.Broadcast, at time.Time) { c.rows.put(b.ID, b, at) }

// forget drops id after this instance changed it (cancel, finish).
func (c *readCache) forget(id uint64) {
	c.rows.forget(id)
	c.engagement.forget(id)
}

// ttlMap keeps values by broadcast id for ttl (0: not at all).
type ttlMap[T any] struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[uint64]cached[T]
}

type cached[T any] struct {
	v  T
	at time.Time
}

// maxCached bounds each map; past it, expired entries are dropped.
const maxCached = 1024

func (c *ttlMap[T]) get(id uint64, now time.Time) (T, bool) {
	var zero T
	if c.ttl <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || now.Sub(e.at) >= c.ttl {
		return zero, false
	}
	return e.v, true
}

func (c *ttlMap[T]) put(id uint64, v T, at time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uint64]cached[T]{}
	}
	if len(c.m) >= maxCached {
		for id, e := range c.m {
			if at.Sub(e.at) >= c.ttl {
				delete(c.m, id)
			}
		}
		if len(c.m) >= maxCached {
			clear(c.m) // all fresh: a burst of distinct ids; start over
		}
	}
	c.m[id] = cached[T]{v: v, at: at}
}

func (c *ttlMap[T]) forget(id uint64) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// Peek returns the broadcast as GET /push/broadcasts/{id} shows it: read at
// most BroadcastTTL ago (Get always reads MySQL). Callers must not modify
// the result.
func (r *Reader) Peek(ctx context.Context, id uint64) (*model.Broadcast, error) {
	now := time.Now()
	if b, ok := r.rows.get(id, now); ok {
		return b, nil
	}
	b, err := r.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	r.rows.put(b, now)
	return b, nil
}
