package broadcast

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// source returns the engine's Source for the chunk (lo, hi] of b.
// zones is the chunk's zone group (lease.Plan.Zones; "" for every zone).
func (s *Service) source(b *model.Broadcast, hi uint64, zones string) (fanout.Source, error) {
	if b.Audience.Name == "" {
		a := b.Audience
		var err error
		if a.Zones, err = zoneFilter(zones); err != nil {
			return nil, err
		}
		return &builtinSource{store: s.store, audience: a, upto: hi, timeout: s.opt.DBTimeout}, nil
	}
	bound, err := s.bind(b.Audience)
	if err != nil {
		return nil, err
	}
	return &namedSource{s: s, bound: bound, upto: hi}, nil
}

// bind looks a named audience up and binds its stored parameters.
func (s *Service) bind(a model.Audience) (audience.Bound, error) {
	named, ok := s.opt.Rules.Audiences[a.Name]
	if !ok {
		return audience.Bound{}, fmt.Errorf("named audience %q is not configured on this instance", a.Name)
	}
	return named.BindJSON(a.Params)
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

// namedSource pages a named SQL audience by its cursor column within one
// chunk.
type namedSource struct {
	s     *Service
	bound audience.Bound
	upto  uint64
	rows  []audience.Row
}

func (n *namedSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, n.s.opt.DBTimeout)
	defer cancel()
	var err error
	if n.rows, err = n.s.opt.Named.Page(ctx, n.bound, after, n.upto, limit, n.rows); err != nil {
		return dst, err
	}
	for _, r := range n.rows {
		// A named audience gives a localized message its users' languages
		// by a column named locale.
		dst = append(dst, fanout.Target{Cursor: r.Cursor, UserID: r.UserID, Token: r.Token, Vars: r.Vars, Locale: r.Vars["locale"]})
	}
	return dst, nil
}

// countRemaining counts the targets of src after `after` that lie in none
// of the done ranges: those a stopped chunk never attempted.
func countRemaining(ctx context.Context, src fanout.Source, after uint64, done []fanout.Range) (int64, error) {
	const page = 1000
	var n int64
	var buf []fanout.Target
	for {
		var err error
		if buf, err = src.Page(ctx, after, page, buf); err != nil {
			return n, err
		}
		for _, t := range buf {
			for len(done) > 0 && done[0].Hi < t.Cursor {
				done = done[1:]
			}
			if len(done) == 0 || t.Cursor < done[0].Lo {
				n++
			}
		}
		if len(buf) < page {
			return n, nil
		}
		after = buf[len(buf)-1].Cursor
	}
}

// plan splits a broadcast's audience into chunks (repository.Planner): the
// built-in audiences by the tokens they really have, a named audience by
// cursor ranges when its query takes :upto, else as one chunk. A named
// audience this instance lacks is one chunk too, which an instance that
// has it will run (see HandBack).
func (s *Service) plan(ctx context.Context, tx *sql.Tx, b *model.Broadcast) ([]lease.Plan, uint64, error) {
	if b.Audience.Name == "" && b.Audience.Local != nil {
		return s.planLocal(ctx, tx, b)
	}
	if b.Audience.Name == "" {
		return s.store.Schema().PlanBuiltin(ctx, tx, b.Audience, s.opt.ChunkWidth, s.opt.MaxChunks)
	}
	whole := []lease.Plan{{Lo: 0, Hi: math.MaxUint64, Targets: -1}}
	named, ok := s.opt.Rules.Audiences[b.Audience.Name]
	if !ok || !named.Splittable() {
		return whole, 0, nil
	}
	bound, err := named.BindJSON(b.Audience.Params)
	if err != nil {
		return whole, 0, nil // the run reports it, naming the audience
	}
	lo, hi, ok, err := s.opt.Named.Bounds(ctx, bound)
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("plan named audience %q: %w", b.Audience.Name, err)
	case !ok:
		return nil, 0, nil // nobody: the broadcast completes empty
	}
	return repository.SplitRange(lo-1, hi, s.opt.ChunkWidth, s.opt.MaxChunks), 0, nil
}

// personalizer renders templated messages per target; nil when the
// message has no template action (one message serves everyone, or one per
// language: the Variants, prepared once each). A localized message's
// Variants pick and count each target's language either way.
func personalizer(b *model.Broadcast, base *fanout.Message) (fanout.Personalizer, *fanout.Variants, error) {
	m := b.Message
	tmpl, err := audience.ParseTemplate(m.Title, m.Body, m.Data, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("message template: %w", err)
	}
	plat, err := newPlatformTemplate(m)
	if err != nil {
		return nil, nil, err
	}
	loc := newLocaleMatcher(m.Localized)
	if loc == nil {
		if tmpl.IsStatic() && plat == nil {
			return nil, nil, nil
		}
		return render(tmpl, base, nil, nil, plat), nil, nil
	}
	// One template per variant, the default last (as in loc.names).
	static := tmpl.IsStatic() && plat == nil
	tmpls := make([]*audience.Template, 0, len(loc.names))
	for _, name := range loc.names[:len(loc.names)-1] {
		l := m.Localized[name]
		t, err := audience.ParseTemplate(l.Title, l.Body, m.Data, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("message template (localized %s): %w", name, err)
		}
		static = static && t.IsStatic()
		tmpls = append(tmpls, t)
	}
	tmpls = append(tmpls, tmpl)
	variants := loc.variants(b, base)
	if static {
		return nil, variants, nil
	}
	return render(nil, base, loc, tmpls, plat), variants, nil
}

// render is the Personalizer of a templated message: tmpl, or with a
// matcher the template of the target's language among tmpls.
func render(tmpl *audience.Template, base *fanout.Message, loc *localeMatcher, tmpls []*audience.Template, plat *platformTemplate) fanout.Personalizer {
	return func(t fanout.Target) (*fanout.Message, error) {
		tmpl := tmpl
		if loc != nil {
			tmpl = tmpls[loc.pick(t.Locale)]
		}
		title, body, data, err := tmpl.Render(t.Vars)
		if err != nil {
			return nil, err
		}
		p := base.Platform
		if plat != nil {
			if p, err = plat.render(t.Vars, base.Platform); err != nil {
				return nil, err
			}
		}
		return &fanout.Message{Title: title, Body: body, Image: base.Image, Data: data, CollapseKey: base.CollapseKey, Platform: p, DryRun: base.DryRun}, nil
	}
}

// estimate counts a queued broadcast's audience for its live targeted:
// per chunk for "all" (so a cancel can count never-run chunks at once),
// as one figure for a named audience. user_ids chunks were counted when
// they were planned.
func (s *Service) estimate(ctx context.Context, b *model.Broadcast) error {
	switch {
	case b.Audience.Local != nil:
		return nil // planLocal counted every chunk
	case b.Audience.All:
		rows, err := s.leases.Chunks(ctx, b.ID)
		if err != nil || len(rows) == 0 {
			return err
		}
		bounds := make([]uint64, 0, len(rows)+1)
		bounds = append(bounds, rows[0].Lo)
		for _, r := range rows {
			bounds = append(bounds, r.Hi)
		}
		counts, err := s.store.CountChunks(ctx, b.Audience, bounds)
		if err != nil {
			return err
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		return s.leases.SetTargets(ctx, b.ID, counts, total)
	case b.Audience.Name != "":
		bound, err := s.bind(b.Audience)
		if err != nil {
			return err
		}
		n, _, err := s.opt.Named.Preview(ctx, bound, 0)
		if err != nil {
			return err
		}
		return s.leases.SetTargets(ctx, b.ID, nil, n)
	}
	return nil
}

// LastJobFire returns a job's latest fire (fired or skipped).
func (s *Service) LastJobFire(ctx context.Context, job string) (model.LastFire, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.LastJobFire(ctx, job)
}

// RecordSkippedFires notes fires that will not run.
func (s *Service) RecordSkippedFires(ctx context.Context, job string, fires []time.Time, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.RecordSkippedFires(ctx, job, fires, reason)
}
