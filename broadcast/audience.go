package broadcast

import (
	"context"
	"fmt"
	"time"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/repository"
)

// source returns the engine's Source for a broadcast's chunk and a counter
// of the targets in (after, hi] (for those never attempted when it stops).
func (s *Service) source(b *repository.Broadcast, hi uint64) (fanout.Source, func(ctx context.Context, after uint64) (int64, error), error) {
	if b.Audience.Name == "" {
		src := &audienceSource{store: s.store, audience: b.Audience, upto: hi, timeout: s.opt.DBTimeout}
		count := func(ctx context.Context, after uint64) (int64, error) {
			return s.store.CountAudienceRange(ctx, b.Audience, after, hi)
		}
		return src, count, nil
	}
	bound, err := s.bind(b.Audience)
	if err != nil {
		return nil, nil, err
	}
	src := &namedSource{s: s, bound: bound}
	count := func(ctx context.Context, after uint64) (int64, error) {
		var n int64
		var rows []audience.Row
		for {
			var err error
			if rows, err = bound.Page(ctx, s.store.DB(), after, 1000, rows); err != nil {
				return n, err
			}
			n += int64(len(rows))
			if len(rows) < 1000 {
				return n, nil
			}
			after = rows[len(rows)-1].Cursor
		}
	}
	return src, count, nil
}

// bind looks a named audience up and binds its stored parameters.
func (s *Service) bind(a repository.Audience) (audience.Bound, error) {
	named, ok := s.opt.Audiences[a.Name]
	if !ok {
		return audience.Bound{}, fmt.Errorf("named audience %q is not configured on this instance", a.Name)
	}
	return named.BindJSON(a.Params)
}

// namedSource pages a named SQL audience by its cursor column.
type namedSource struct {
	s     *Service
	bound audience.Bound
	rows  []audience.Row
}

func (n *namedSource) Page(ctx context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	ctx, cancel := context.WithTimeout(ctx, n.s.opt.DBTimeout)
	defer cancel()
	var err error
	if n.rows, err = n.bound.Page(ctx, n.s.store.DB(), after, limit, n.rows); err != nil {
		return dst, err
	}
	for _, r := range n.rows {
		dst = append(dst, fanout.Target{Cursor: r.Cursor, UserID: r.UserID, Token: r.Token, Vars: r.Vars})
	}
	return dst, nil
}

// personalizer renders templated messages per target; nil when the
// message has no template action (one message serves everyone).
func personalizer(b *repository.Broadcast, base *fanout.Message) (fanout.Personalizer, error) {
	m := b.Message
	tmpl, err := audience.ParseTemplate(m.Title, m.Body, m.Data, nil)
	if err != nil {
		return nil, fmt.Errorf("message template: %w", err)
	}
	if tmpl.IsStatic() {
		return nil, nil
	}
	return func(t fanout.Target) (*fanout.Message, error) {
		title, body, data, err := tmpl.Render(t.Vars)
		if err != nil {
			return nil, err
		}
		return &fanout.Message{Title: title, Body: body, Image: base.Image, Data: data, CollapseKey: base.CollapseKey, DryRun: base.DryRun}, nil
	}, nil
}

// estimate counts a broadcast's audience for its live "targeted".
func (s *Service) estimate(ctx context.Context, b *repository.Broadcast) (int64, error) {
	if b.Audience.Name == "" {
		return s.store.CountAudienceRange(ctx, b.Audience, 0, b.MaxTokenID)
	}
	bound, err := s.bind(b.Audience)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n, _, err := bound.Preview(ctx, s.store.DB(), 0)
	return n, err
}

// Preview counts a bound named audience and samples up to n user ids.
func (s *Service) Preview(ctx context.Context, b audience.Bound, n int) (int64, []uint64, error) {
	return b.Preview(ctx, s.store.DB(), n)
}

// LastJobFire returns a job's latest fire (fired or skipped).
func (s *Service) LastJobFire(ctx context.Context, job string) (repository.LastFire, error) {
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
