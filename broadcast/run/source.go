package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/fanout"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// source returns the engine's Source for chunk c of b: its target list
// when the plan fixed one, else its range (Lo, Hi] of the audience.
func (s *Runner) source(app *instance.App, b *model.Broadcast, c *lease.Claim) (fanout.Source, error) {
	if b.Audience.Name == "" {
		if c.IDs != nil {
			return &listSource{store: app.Store, ids: c.IDs, timeout: s.in.DBTimeout}, nil
		}
		a := b.Audience
		var err error
		if a.Zones, err = zoneFilter(c.Zones); err != nil {
			return nil, err
		}
		return &builtinSource{store: app.Store, audience: a, upto: c.Hi, timeout: s.in.DBTimeout}, nil
	}
	bound, err := s.opt.Bind(b.Audience)
	if err != nil {
		return nil, err
	}
	return &namedSource{named: s.opt.Named, bound: bound, upto: c.Hi, ids: c.IDs, timeout: s.in.DBTimeout}, nil
}

// builtinSource pages the bundled tables' audience within one chunk.
type builtinSource struct {
	store    *repository.Store
	audience model.Audience
	upto     uint64
	timeout  time.Duration
	buf      []repository.Target // reused: only the engine's producer calls Page
}

func (a *builtinSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var err error
	if a.buf, err = a.store.AudiencePage(ctx, a.audience, after, a.upto, limit, a.buf); err != nil {
		return dst, err
	}
	for _, t := range a.buf {
		dst = append(dst, fanout.Target{Cursor: t.TokenID, TokenID: t.TokenID, UserID: t.UserID, Token: t.Token, Locale: t.Locale})
	}
	return dst, nil
}

// listSource pages a chunk whose targets the plan fixed (local time):
// the next ids of its list, read by primary key, skipping those no longer
// valid, so that every page but the last is full (the engine takes a short
// page for the end).
type listSource struct {
	store   *repository.Store
	ids     []uint64
	timeout time.Duration
	buf     []repository.Target
}

func (l *listSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	i, _ := slices.BinarySearch(l.ids, after+1)
	for len(dst) < limit && i < len(l.ids) {
		n := min(limit-len(dst), len(l.ids)-i, repository.MaxIDsPerRead)
		batch := l.ids[i : i+n]
		i += n
		c, cancel := context.WithTimeout(ctx, l.timeout)
		var err error
		l.buf, err = l.store.TargetsByID(c, batch, l.buf)
		cancel()
		if err != nil {
			return dst[:0], err
		}
		for _, t := range l.buf {
			dst = append(dst, fanout.Target{Cursor: t.TokenID, TokenID: t.TokenID, UserID: t.UserID, Token: t.Token, Locale: t.Locale})
		}
	}
	return dst, nil
}

// namedSource pages a named SQL audience by its cursor column within one
// chunk. A chunk of a local-time plan carries its target list (ids, the
// cursors of one zone group, spread over the audience): its pages keep
// only those rows, reading on through the others' until a page is full,
// since the engine takes a short page for the chunk's end.
type namedSource struct {
	named   *audience.Runner
	bound   audience.Bound
	upto    uint64
	ids     []uint64 // nil: every row in the range
	timeout time.Duration
	rows    []audience.Row
}

func (n *namedSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	for len(dst) < limit {
		var err error
		if n.rows, err = n.named.Page(ctx, n.bound, after, n.upto, limit, n.rows); err != nil {
			return dst[:0], err
		}
		for _, r := range n.rows {
			if n.ids != nil {
				if _, in := slices.BinarySearch(n.ids, r.Cursor); !in {
					continue
				}
			}
			// A named audience gives a localized message its users'
			// languages by a column named locale.
			dst = append(dst, fanout.Target{Cursor: r.Cursor, UserID: r.UserID, Token: r.Token, Vars: r.Vars, Locale: r.Vars["locale"]})
			if len(dst) == limit {
				return dst, nil
			}
		}
		if n.ids == nil || len(n.rows) < limit {
			return dst, nil // the range is read to its end
		}
		after = n.rows[len(n.rows)-1].Cursor
	}
	return dst, nil
}

// zoneFilter decodes the zone group of a chunk planned before migration
// 00014 (lease.Claim.Zones); nil for every other chunk.
func zoneFilter(raw string) (*model.ZoneFilter, error) {
	if raw == "" {
		return nil, nil
	}
	var z model.ZoneFilter
	if err := json.Unmarshal([]byte(raw), &z); err != nil {
		return nil, fmt.Errorf("chunk zones %q: %w", raw, err)
	}
	return &z, nil
}
