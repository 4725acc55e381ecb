package reads

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/broadcast/rules"
	"pushfan/broadcast/run"
	"pushfan/internal/platform/lifecycle"
	"pushfan/model"
	"pushfan/repository"
)

// ErrNotFound: no broadcast with that id.
var ErrNotFound = errors.New("broadcast not found")

// Options tunes the reads.
type Options struct {
	DBTimeout time.Duration // deadline of every database call
	// Rules are the request rules a preview checks its audience and cap
	// by, with the budgets a running broadcast's expected finish (and a
	// Wait's deadline) reckon with; Named runs named audiences' SQL.
	Rules rules.Rules
	Named *audience.Runner
	// StatsTTL caches GET /push/stats totals this long (0: no cache): the
	// query scans every broadcast, and a dashboard polling it must not slow
	// the sends down.
	StatsTTL time.Duration
	// BroadcastTTL caches GET /push/broadcasts/{id} rows this long (0: no
	// cache); see readCache.
	BroadcastTTL time.Duration
	// PreviewTTL keeps audience previews' counts this long (0: no cache);
	// see previewCache.
	PreviewTTL time.Duration
	// Stopped is closed when the broadcast service stops taking work: a
	// Wait returns then, as nothing on this instance moves the broadcast
	// on (nil: only the caller's context ends a Wait).
	Stopped *lifecycle.Latch
}

// Reader answers what is stored of the broadcasts: rows, lists, totals,
// failures, engagement, audience previews, waits for a broadcast to end.
// It writes nothing; the write side (package broadcast) tells it which
// broadcasts it changed (Forget), so that its caches never answer a row
// older than the change.
type Reader struct {
	store *repository.Store
	apps  *instance.Apps
	opt   Options
	now   func() time.Time

	statsMu sync.Mutex            // also makes concurrent callers share one query
	stats   map[string]statsEntry // by app set

	rows     readCache    // GET /push/broadcasts/{id}
	previews previewCache // audience previews' counts
}

// New builds a Reader over the store and this instance's apps.
func New(store *repository.Store, apps *instance.Apps, opt Options) *Reader {
	return &Reader{store: store, apps: apps, opt: opt, now: time.Now,
		rows: newReadCache(opt.BroadcastTTL), previews: previewCache{ttl: opt.PreviewTTL}}
}

// Forget drops broadcast id from the caches: this instance changed it
// (a cancel, a release, a promotion, a checkpoint, its end).
func (r *Reader) Forget(id uint64) { r.rows.forget(id) }

// Get returns the stored broadcast (counters as of the last checkpoints).
func (r *Reader) Get(ctx context.Context, id uint64) (*model.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	b, err := r.store.GetBroadcast(ctx, id)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	return b, err
}

// List returns broadcasts newest first.
func (r *Reader) List(ctx context.Context, f model.ListFilter) ([]*model.Broadcast, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	return r.store.ListBroadcasts(ctx, f)
}

// ExpectedFinish is when running broadcast b should end (see
// run.ExpectedFinish), by its app's budget and this reader's clock.
func (r *Reader) ExpectedFinish(b *model.Broadcast) *time.Time {
	return run.ExpectedFinish(b, r.opt.Rules.BudgetOf(b.App), r.now())
}

// Stats returns totals across the broadcasts of apps (nil: every app), at
// most StatsTTL old.
func (r *Reader) Stats(ctx context.Context, apps []string) (model.Stats, error) {
	key := "*"
	if apps != nil {
		key = strings.Join(apps, "|")
	}
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	if c, ok := r.stats[key]; ok && r.opt.StatsTTL > 0 && time.Since(c.at) < r.opt.StatsTTL {
		return c.st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	st, err := r.store.Stats(ctx, apps)
	if err != nil {
		return st, err
	}
	if r.stats == nil || len(r.stats) > 64 {
		r.stats = map[string]statsEntry{} // a handful of app sets in use; never grows unbounded
	}
	r.stats[key] = statsEntry{st: st, at: time.Now()}
	return st, nil
}

// statsEntry is one cached Stats answer.
type statsEntry struct {
	st model.Stats
	at time.Time
}

// Failures lists failed tokens of a broadcast by keyset.
func (r *Reader) Failures(ctx context.Context, id uint64, f model.FailureFilter, after uint64, limit int) ([]model.Failure, error) {
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	return r.store.ListFailures(ctx, id, f, after, limit)
}

// LastJobFire returns a job's latest fire (fired or skipped).
func (r *Reader) LastJobFire(ctx context.Context, job string) (model.LastFire, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	return r.store.LastJobFire(ctx, job)
}
