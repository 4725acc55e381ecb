package broadcast

import (
	"context"
	"sync"
	"time"

	"pushfan/model"
)

// readCache keeps recently read broadcasts for GET /push/broadcasts/{id}.
// Admin consoles poll a running broadcast several times a second, often
// from many tabs; each poll was a MySQL query on the machine that is also
// sending. A quarter second old is as good to a person watching a progress
// bar, and the sends keep their CPU.
type readCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[uint64]cachedBroadcast
}

type cachedBroadcast struct {
	b  *model.Broadcast // shared, read-only
	at time.Time
}

// maxCached bounds the cache; past it, expired entries are dropped.
const maxCached = 1024

func (c *readCache) get(id uint64, now time.Time) (*model.Broadcast, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || now.Sub(e.at) >= c.ttl {
		return nil, false
	}
	return e.b, true
}

func (c *readCache) put(b *model.Broadcast, at time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uint64]cachedBroadcast{}
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
	c.m[b.ID] = cachedBroadcast{b: b, at: at}
}

// forget drops id after this instance changed it (cancel, finish).
func (c *readCache) forget(id uint64) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// Peek returns the broadcast as GET /push/broadcasts/{id} shows it: read at
// most BroadcastTTL ago (Get always reads MySQL). Callers must not modify
// the result.
func (s *Service) Peek(ctx context.Context, id uint64) (*model.Broadcast, error) {
	now := time.Now()
	if b, ok := s.reads.get(id, now); ok {
		return b, nil
	}
	b, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	s.reads.put(b, now)
	return b, nil
}
