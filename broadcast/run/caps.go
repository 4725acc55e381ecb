package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"pushfan/broadcast/instance"
	"pushfan/caps"
	"pushfan/fanout"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// capRun is one chunk run's frequency caps: the set its broadcast is sent
// under, who it is in the ledger (itself, with the root of its chain for
// a resend), the chunk run its reservations hold answers for, and its
// users' zones.
type capRun struct {
	s      *Runner
	store  *repository.Store // the app's: its users' zones
	key    caps.Broadcast
	holder caps.Holder
	set    caps.Set
	zones  zoneCache
}

// capsOf returns b's caps for chunk run c: nil when b is sent under none
// (none recorded on it, a dry run, or no ledger here).
func (s *Runner) capsOf(ctx context.Context, app *instance.App, b *model.Broadcast, c *lease.Claim) (*capRun, error) {
	if b.FrequencyCap == "" || b.DryRun || s.opt.Ledger == nil {
		return nil, nil
	}
	set, err := caps.Parse(b.FrequencyCap)
	if err != nil {
		return nil, fmt.Errorf("broadcast %d: %w", b.ID, err)
	}
	root, err := s.capRoot(ctx, b)
	if err != nil {
		return nil, err
	}
	key := caps.Broadcast{ID: b.ID, Root: root}
	return &capRun{s: s, store: app.Store, key: key, holder: caps.Holder{Chunk: c.Seq, Epoch: c.Epoch}, set: set.ForApp(b.App), zones: zoneCache{def: s.opt.DefaultZone}}, nil
}

// maxResendDepth bounds the walk up a chain of resends (a chain is as
// long as an operator resent resends; the bound only stops a cycle that
// bad data could make).
const maxResendDepth = 64

// capRoot is the broadcast whose slots b takes in the ledger: itself, or
// for a resend the root of its chain (the original a resend of a resend
// of … went over), so that a user the original was sent to (on another
// device) is sent every resend too, under the original's slot, and counts
// them all as one send; a user the original released reserves afresh.
// The answers and holds are b's own either way (caps.Broadcast). An
// original that retention deleted ends the walk at the oldest broadcast
// still stored.
func (s *Runner) capRoot(ctx context.Context, b *model.Broadcast) (uint64, error) {
	cur := b
	for range maxResendDepth {
		if cur.Trigger != "resend" || cur.ParentID == 0 {
			break
		}
		var parent *model.Broadcast
		err := s.in.RetryDB(ctx, "reading a resend's original", func(ctx context.Context) (err error) {
			parent, err = s.store.GetBroadcast(ctx, cur.ParentID)
			if errors.Is(err, repository.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("broadcast %d: the root of its resends: %w", b.ID, err)
		}
		if parent == nil {
			return cur.ParentID, nil
		}
		cur = parent
	}
	return cur.ID, nil
}

// job is the engine's Job.Cap (nil without caps): each page's users are
// answered by the ledger before any of the page's targets is sent, in a
// few statements for the whole page.
func (c *capRun) job() func(context.Context, []fanout.Target) ([]bool, error) {
	if c == nil {
		return nil
	}
	return func(ctx context.Context, page []fanout.Target) ([]bool, error) {
		ids := make([]uint64, len(page))
		for i, t := range page {
			ids[i] = t.UserID
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		locs, err := c.zonesOf(ctx, ids)
		if err != nil {
			return nil, err
		}
		targets := make(map[uint64]int, len(ids))
		for _, t := range page {
			targets[t.UserID]++
		}
		users := make([]caps.User, len(ids))
		for i, id := range ids {
			users[i] = caps.User{ID: id, Zone: locs[id], Targets: targets[id]}
		}
		h := c.holder
		h.Upto = page[len(page)-1].Cursor
		rctx, cancel := context.WithTimeout(ctx, c.s.in.DBTimeout)
		defer cancel()
		capped, err := c.s.opt.Ledger.Reserve(rctx, c.key, h, c.set, users, c.s.in.Now())
		if err != nil {
			return nil, err
		}
		out := make([]bool, len(page))
		for i, t := range page {
			out[i] = capped[t.UserID]
		}
		return out, nil
	}
}

// zonesOf reads the zones of users ids (only a daily cap needs them).
func (c *capRun) zonesOf(ctx context.Context, ids []uint64) (map[uint64]*time.Location, error) {
	out := make(map[uint64]*time.Location, len(ids))
	if !c.set.Daily() {
		return out, nil
	}
	zctx, cancel := context.WithTimeout(ctx, c.s.in.DBTimeout)
	named, err := c.store.UserZones(zctx, ids)
	cancel()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		out[id] = c.zones.get(named[id])
	}
	return out, nil
}

// settle settles a checkpoint's users in its transaction tx.
func (c *capRun) settle(ctx context.Context, tx *sql.Tx, sent, unsent []uint64) (caps.Settled, error) {
	return c.s.opt.Ledger.Settle(ctx, tx, caps.Settlement{
		B: c.key, Holder: c.holder, Set: c.set, Sent: sent, Unsent: unsent, Zones: c.zonesOf, Now: c.s.in.Now(),
	})
}

// zoneCache loads each zone name once per chunk run, for the engine's
// producer and the checkpoints alike; an unknown or empty name is the
// default zone, as for local-time delivery.
type zoneCache struct {
	def   *time.Location
	mu    sync.Mutex
	known map[string]*time.Location
}

func (z *zoneCache) get(name string) *time.Location {
	def := z.def
	if def == nil {
		def = time.UTC
	}
	if name == "" {
		return def
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if loc, ok := z.known[name]; ok {
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = def
	}
	if z.known == nil {
		z.known = map[string]*time.Location{}
	}
	z.known[name] = loc
	return loc
}
