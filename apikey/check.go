package apikey

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxCached bounds the cache: past it, the lookups older than the TTL are
// dropped, and if that is not enough, all of them (a flood of wrong keys
// cannot grow memory; the failed-auth budget limits it anyway).
const maxCached = 10_000

// cache holds recent lookups by secret hash, misses included, and when
// each key's last use was last written by this instance.
type cache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*lookup
	used    map[string]time.Time
}

// lookup is one lookup of a hash: done is closed once key and err are
// set, so concurrent checks of one key wait for one query instead of each
// making their own.
type lookup struct {
	done chan struct{}
	at   time.Time
	key  Key
	err  error // ErrUnknown for no such key; a database error is not kept
}

func newCache() *cache {
	return &cache{entries: map[[sha256.Size]byte]*lookup{}, used: map[string]time.Time{}}
}

// forgetID drops the lookups of key id (after a revoke on this instance).
func (c *cache) forgetID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, l := range c.entries {
		select {
		case <-l.done:
			if l.err == nil && l.key.ID == id {
				delete(c.entries, h)
			}
		default:
		}
	}
}

// get returns the lookup of h younger than ttl, or a new one the caller
// must fill (fill true).
func (c *cache) get(h [sha256.Size]byte, now time.Time, ttl time.Duration) (l *lookup, fill bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.entries[h]; ok && now.Sub(l.at) < ttl {
		return l, false
	}
	if len(c.entries) >= maxCached {
		for x, l := range c.entries {
			if now.Sub(l.at) >= ttl {
				delete(c.entries, x)
			}
		}
		if len(c.entries) >= maxCached {
			clear(c.entries)
		}
	}
	l = &lookup{done: make(chan struct{}), at: now}
	c.entries[h] = l
	return l, true
}

// drop removes l, unless a newer lookup replaced it.
func (c *cache) drop(h [sha256.Size]byte, l *lookup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[h] == l {
		delete(c.entries, h)
	}
}

// dueUse reports whether key id's use at now should be written, and if
// so notes it as written (so one request a minute writes, not all).
func (c *cache) dueUse(id string, now time.Time, every time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.used[id]; ok && now.Sub(last) < every {
		return false
	}
	if len(c.used) >= maxCached {
		clear(c.used)
	}
	c.used[id] = now
	return true
}

// Check returns the key whose secret is presented: ErrUnknown when it is
// none's; ErrRevoked or ErrExpired (wrapped) with the key, to say which
// and when; any other error is the database's. The lookup is cached for at most
// Options.CacheTTL; the key's last use is written at most once per
// Options.UsedEvery on this instance.
func (k *Keys) Check(ctx context.Context, secret string) (Key, error) {
	if !LooksLikeKey(secret) {
		return Key{}, ErrUnknown
	}
	h := Hash(secret)
	now := k.opts.Now()
	l, fill := k.cache.get(h, now, k.opts.CacheTTL)
	if fill {
		// Not the request's context: others wait on this lookup, and a
		// client that went away must not fail theirs.
		l.key, l.err = k.lookup(context.WithoutCancel(ctx), h)
		if l.err != nil && !errors.Is(l.err, ErrUnknown) {
			k.cache.drop(h, l) // a database error is not an answer to keep
		}
		close(l.done)
	} else {
		select {
		case <-l.done:
		case <-ctx.Done():
			return Key{}, ctx.Err()
		}
	}
	if l.err != nil {
		return Key{}, l.err
	}
	key := l.key
	switch {
	case key.RevokedAt != nil:
		return key, fmt.Errorf("API key %s: %w", key.ID, ErrRevoked)
	case key.ExpiresAt != nil && !now.Before(*key.ExpiresAt):
		return key, fmt.Errorf("API key %s: %w", key.ID, ErrExpired)
	}
	if k.cache.dueUse(key.ID, now, k.opts.UsedEvery) {
		k.markUsed(ctx, key.ID, now)
	}
	return key, nil
}

// lookup reads the key of hash h; ErrUnknown for none.
func (k *Keys) lookup(ctx context.Context, h [sha256.Size]byte) (Key, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.DBTimeout)
	defer cancel()
	key, err := scanKey(k.db.QueryRowContext(ctx, "SELECT "+keyColumns+" FROM api_keys WHERE secret_hash = ?", h[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, ErrUnknown
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up API key: %w", err)
	}
	return key, nil
}

// markUsed writes key id's last use. A failure is logged, not the
// request's: the key was valid, and the next minute writes again.
func (k *Keys) markUsed(ctx context.Context, id string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.opts.DBTimeout)
	defer cancel()
	at = at.UTC().Truncate(time.Microsecond)
	// Never backwards: another instance may have written a later use.
	if _, err := k.db.ExecContext(ctx, "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)", at, id, at); err != nil {
		k.log.WarnContext(ctx, "writing an API key's last use", "key_id", id, "err", err)
	}
}
