package run

import (
	"context"
	"fmt"
	"slices"
	"time"

	"pushfan/caps"
	"pushfan/fanout"
	"pushfan/model"
)

// capper returns the engine's Job.Cap for b: nil when b is sent under no
// cap (none recorded on it, a dry run, or no ledger here). Each page's
// users are answered by the ledger before any of the page's targets is
// sent, in a few statements for the whole page.
func (s *Runner) capper(b *model.Broadcast) (func(context.Context, []fanout.Target) ([]bool, error), error) {
	if b.FrequencyCap == "" || b.DryRun || s.opt.Ledger == nil {
		return nil, nil
	}
	set, err := caps.Parse(b.FrequencyCap)
	if err != nil {
		return nil, fmt.Errorf("broadcast %d: %w", b.ID, err)
	}
	zones := zoneCache{def: s.opt.DefaultZone}
	return func(ctx context.Context, page []fanout.Target) ([]bool, error) {
		ids := make([]uint64, len(page))
		for i, t := range page {
			ids[i] = t.UserID
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		users := make([]caps.User, len(ids))
		var named map[uint64]string
		if set.Daily() {
			c, cancel := context.WithTimeout(ctx, s.in.DBTimeout)
			var err error
			named, err = s.store.UserZones(c, ids)
			cancel()
			if err != nil {
				return nil, err
			}
		}
		for i, id := range ids {
			users[i] = caps.User{ID: id, Zone: zones.get(named[id])}
		}
		c, cancel := context.WithTimeout(ctx, s.in.DBTimeout)
		defer cancel()
		capped, err := s.opt.Ledger.Reserve(c, capKey(b), set, users, s.in.Now())
		if err != nil {
			return nil, err
		}
		out := make([]bool, len(page))
		for i, t := range page {
			out[i] = capped[t.UserID]
		}
		return out, nil
	}, nil
}

// capKey is the broadcast b counts as in the ledger: itself, or for a
// resend its original, so that a user the original was sent to (on
// another device) is sent the resend too, and counts the two as one
// send; a user the original released reserves afresh.
func capKey(b *model.Broadcast) uint64 {
	if b.Trigger == "resend" && b.ParentID != 0 {
		return b.ParentID
	}
	return b.ID
}

// zoneCache loads each zone name once per chunk run (only the engine's
// producer calls it); an unknown or empty name is the default zone, as
// for local-time delivery.
type zoneCache struct {
	def   *time.Location
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
