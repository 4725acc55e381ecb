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
	"pushfan/lease/sends"
	"pushfan/model"
	"pushfan/repository"
)

// source returns the engine's Source for chunk c of b: its target list
// when the plan fixed one, else its range (Lo, Hi] of the audience.
// staleID is told each stale token a page passes over (kept as outcome
// stale by the run's next checkpoint).
func (s *Runner) source(app *instance.App, b *model.Broadcast, c *lease.Claim, staleID func(uint64)) (fanout.Source, error) {
	stale := func(n int) { s.opt.Metrics.StaleSkipped(b.App, n) }
	// The category's consent is read again by every page: a user who
	// withdrew it since the plan is not sent to (docs/consent.md).
	store := app.Store.ForCategory(b.Category)
	if b.Audience.Name == "" {
		if c.IDs != nil {
			return &listSource{store: store, ids: c.IDs, timeout: s.in.DBTimeout, stale: stale, staleID: staleID}, nil
		}
		a := b.Audience
		var err error
		if a.Zones, err = zoneFilter(c.Zones); err != nil {
			return nil, err
		}
		return &builtinSource{store: store, audience: a, upto: c.Hi, timeout: s.in.DBTimeout, stale: stale, staleID: staleID}, nil
	}
	bound, err := s.opt.Bind(b.Audience)
	if err != nil {
		return nil, err
	}
	return &namedSource{named: s.opt.Named, store: store, bound: bound, upto: c.Hi, ids: c.IDs, timeout: s.in.DBTimeout, stale: stale, staleID: staleID}, nil
}

// builtinSource pages the bundled tables' audience within one chunk.
type builtinSource struct {
	store    *repository.Store
	audience model.Audience
	upto     uint64
	timeout  time.Duration
	stale    func(int)           // counts the tokens a page left out as stale
	staleID  func(uint64)        // is told each of them
	buf      []repository.Target // reused: only the engine's producer calls Page
}

func (a *builtinSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var err error
	var stale int
	if a.buf, stale, err = a.store.AudiencePageStaleIDs(ctx, a.audience, after, a.upto, limit, a.buf, a.staleID); err != nil {
		return dst, err
	}
	a.stale(stale)
	for _, t := range a.buf {
		dst = append(dst, fanout.Target{Cursor: t.TokenID, TokenID: t.TokenID, UserID: t.UserID, Token: t.Token, Locale: t.Locale, Platform: t.Platform})
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
	stale   func(int)
	staleID func(uint64)
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
		var stale int
		l.buf, stale, err = l.store.TargetsByIDStaleIDs(c, batch, l.buf, l.staleID)
		cancel()
		if err != nil {
			return dst[:0], err
		}
		l.stale(stale)
		for _, t := range l.buf {
			dst = append(dst, fanout.Target{Cursor: t.TokenID, TokenID: t.TokenID, UserID: t.UserID, Token: t.Token, Locale: t.Locale, Platform: t.Platform})
		}
	}
	return dst, nil
}

// namedSource pages a named SQL audience by its cursor column within one
// chunk. A chunk of a local-time plan carries its target list (ids, the
// cursors of one zone group, spread over the audience): its pages keep
// only those rows. With PUSHFAN_STALE_AFTER set, the tokens it yields are
// held to the stale rule against the tokens table (Store.StaleTokens): an
// operator's query need not know the rule, as the rule is the
// deployment's, and a stale token is left out of every audience. So are
// the users without consent to the broadcast's category
// (Store.UserConsents), which the plan left out already. A page
// either leaves short reads on, since the engine ends the chunk at the
// first short page.
type namedSource struct {
	named   *audience.Runner
	store   *repository.Store
	bound   audience.Bound
	upto    uint64
	ids     []uint64 // nil: every row in the range
	timeout time.Duration
	stale   func(int)
	staleID func(uint64)
	rows    []audience.Row
	kept    []audience.Row // this chunk's rows of a page
	tokens  []string
	users   []uint64
}

func (n *namedSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	for {
		var err error
		if n.rows, err = n.named.Page(ctx, n.bound, after, n.upto, limit, n.rows); err != nil {
			return dst[:0], err
		}
		n.kept = n.kept[:0]
		for _, r := range n.rows {
			if n.ids != nil {
				if _, in := slices.BinarySearch(n.ids, r.Cursor); !in {
					continue // another zone group's target
				}
			}
			n.kept = append(n.kept, r)
		}
		stale, err := n.staleAmong(ctx, n.kept)
		if err != nil {
			return dst[:0], err
		}
		if n.kept, err = n.consented(ctx, n.kept); err != nil {
			return dst[:0], err
		}
		skipped := 0
		for _, r := range n.kept {
			if len(dst) == limit {
				break // the rest are read again by the next page, and counted then
			}
			if stale[r.Token] {
				skipped++
				n.staleID(r.Cursor)
				continue
			}
			// A named audience gives a localized message its users'
			// languages by a column named locale, and its devices'
			// platforms (counted per platform) by one named platform.
			dst = append(dst, fanout.Target{Cursor: r.Cursor, UserID: r.UserID, Token: r.Token, Vars: r.Vars, Locale: r.Vars["locale"], Platform: r.Vars["platform"]})
		}
		n.stale(skipped)
		if len(dst) == limit || len(n.rows) < limit {
			return dst, nil
		}
		after = n.rows[len(n.rows)-1].Cursor
	}
}

// staleAmong returns which tokens of rows the stale rule leaves out (nil
// while it is off: Store.StaleTokens reads nothing then).
func (n *namedSource) staleAmong(ctx context.Context, rows []audience.Row) (map[string]bool, error) {
	if n.store == nil || !n.store.Schema().StaleRule() {
		return nil, nil
	}
	n.tokens = n.tokens[:0]
	for _, r := range rows {
		n.tokens = append(n.tokens, r.Token)
	}
	return n.store.StaleTokens(ctx, n.tokens)
}

// consented keeps the rows whose users consented to the broadcast's
// category (all of them when it asks for no consent).
func (n *namedSource) consented(ctx context.Context, rows []audience.Row) ([]audience.Row, error) {
	if n.store == nil || !n.store.Schema().ConsentRule() {
		return rows, nil
	}
	n.users = n.users[:0]
	for _, r := range rows {
		n.users = append(n.users, r.UserID)
	}
	ok, err := n.store.UserConsents(ctx, n.users)
	if err != nil {
		return nil, err
	}
	kept := rows[:0]
	for _, r := range rows {
		if ok[r.UserID]&repository.ConsentDay != 0 {
			kept = append(kept, r)
		}
	}
	return kept, nil
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

// splitOf is the checkpoint's split of c's sends (package lease/sends):
// by engine variant, and by the platform each target's page read.
func splitOf(c fanout.Committed) sends.Split {
	var s sends.Split
	if c.Variants != nil {
		s.Variants = make(map[string]sends.Sent, len(c.Variants))
		for k, n := range c.Variants {
			s.Variants[k] = sends.Sent(n)
		}
	}
	for p, n := range c.Platforms {
		s.AddPlatform(p, sends.Sent(n))
	}
	return s
}
