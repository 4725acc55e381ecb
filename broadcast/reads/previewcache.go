package reads

import (
	"context"
	"slices"
	"sync"
	"time"
)

// previewCache keeps audience previews (a count, a sample of user ids and
// the users a cap would withhold) for a short time, shared by every caller on this instance, with one
// count in flight per audience. The console previews as the operator
// types, and counting a large audience reads all of it: the same audience
// retyped, or open in several tabs, costs one count per TTL.
type previewCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*previewEntry
}

// previewEntry is one audience's count, in flight until done is closed.
// Its fields are written before done is closed and read after.
type previewEntry struct {
	done    chan struct{}
	started time.Time
	cancel  context.CancelFunc // ends the count when every caller has left
	waiting int                // callers waiting for it (under previewCache.mu)
	ready   bool               // done is closed (under previewCache.mu)
	p       preview
	err     error
}

// preview is one audience's preview: its targets, a sample of its users,
// and (nil: no cap applies) how many of its users the cap the key names
// would withhold now.
type preview struct {
	count int64
	users int64 // the users holding count's targets, each once
	stale int64 // left out as stale (PUSHFAN_STALE_AFTER)
	// noConsent: left out by the category's consent
	noConsent int64
	sample    []uint64
	capped    *int64
}

// clone is p with its own sample, for one caller.
func (p preview) clone() preview {
	p.sample = slices.Clone(p.sample)
	return p
}

// maxPreviews bounds the cache; past it, expired entries are dropped, and
// if that frees nothing the new count is not kept.
const maxPreviews = 1024

// get answers key's preview: a count started less than ttl ago, the count
// in flight, or a new one made by load. load runs apart from the caller's
// context (an operator's next keystroke aborts the request; the count
// goes on for the others), and is canceled once no caller waits for it.
// Errors are never kept.
func (c *previewCache) get(ctx context.Context, key string, now time.Time, load func(context.Context) (preview, error)) (preview, error) {
	if c.ttl <= 0 {
		return load(ctx)
	}
	c.mu.Lock()
	e := c.m[key]
	if e != nil && e.ready && now.Sub(e.started) >= c.ttl {
		delete(c.m, key)
		e = nil
	}
	if e == nil {
		if !c.room(now) {
			c.mu.Unlock()
			return load(ctx)
		}
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e = &previewEntry{done: make(chan struct{}), started: now, cancel: cancel}
		c.m[key] = e
		go c.run(lctx, key, e, load)
	}
	e.waiting++
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.p.clone(), e.err
	case <-ctx.Done():
		c.mu.Lock()
		if e.waiting--; e.waiting == 0 && !e.ready {
			e.cancel()
			if c.m[key] == e {
				delete(c.m, key)
			}
		}
		c.mu.Unlock()
		return preview{}, ctx.Err()
	}
}

func (c *previewCache) run(ctx context.Context, key string, e *previewEntry, load func(context.Context) (preview, error)) {
	p, err := load(ctx)
	e.cancel()
	c.mu.Lock()
	e.p, e.err, e.ready = p, err, true
	if err != nil && c.m[key] == e {
		delete(c.m, key)
	}
	c.mu.Unlock()
	close(e.done)
}

// room makes room for one more entry if it can; the caller holds c.mu.
func (c *previewCache) room(now time.Time) bool {
	if c.m == nil {
		c.m = map[string]*previewEntry{}
	}
	if len(c.m) < maxPreviews {
		return true
	}
	for k, e := range c.m {
		if e.ready && now.Sub(e.started) >= c.ttl {
			delete(c.m, k)
		}
	}
	return len(c.m) < maxPreviews
}
