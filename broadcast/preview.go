package broadcast

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"pushfan/audience"
	"pushfan/model"
)

// Preview counts a bound named audience and samples up to n user ids. The
// answer may be up to PreviewTTL old (previewCache).
func (s *Service) Preview(ctx context.Context, b audience.Bound, n int) (int64, []uint64, error) {
	params, err := b.ParamsJSON()
	if err != nil {
		return 0, nil, fmt.Errorf("preview: %w", err)
	}
	a := model.Audience{Name: b.Audience().Name(), Params: params}
	return s.previews.get(ctx, previewKey(a, n), s.now(), func(ctx context.Context) (int64, []uint64, error) {
		ctx, cancel := context.WithTimeout(ctx, 6*s.opt.DBTimeout)
		defer cancel()
		return s.opt.Named.Preview(ctx, b, n)
	})
}

// PreviewAudience validates an audience as a broadcast request would (the
// same field errors) and counts the targets a broadcast to it would have
// now, with up to n of their user ids. It sends and stores nothing: the
// console calls it as the operator types, so the answer may be up to
// PreviewTTL old (previewCache).
func (s *Service) PreviewAudience(ctx context.Context, spec *AudienceSpec, n int) (int64, []uint64, error) {
	a, _, err := s.opt.Rules.audience(spec)
	if err != nil {
		return 0, nil, err
	}
	var bound audience.Bound
	if a.Name != "" {
		if bound, err = s.opt.Rules.bind(a); err != nil {
			return 0, nil, err
		}
	}
	return s.previews.get(ctx, previewKey(a, n), s.now(), func(ctx context.Context) (int64, []uint64, error) {
		// A named audience's count pages through all of it: the same
		// budget as its own preview route.
		ctx, cancel := context.WithTimeout(ctx, 6*s.opt.DBTimeout)
		defer cancel()
		if a.Name != "" {
			return s.opt.Named.Preview(ctx, bound, n)
		}
		return s.countBuiltin(ctx, a, n)
	})
}

// previewKey names a validated audience's preview of n users: its stored
// form, as a broadcast would keep it.
func previewKey(a model.Audience, n int) string {
	raw, _ := json.Marshal(a) // a model.Audience always encodes
	return strconv.Itoa(n) + " " + string(raw)
}

// countBuiltin counts a built-in audience and samples up to n user ids.
func (s *Service) countBuiltin(ctx context.Context, a model.Audience, n int) (int64, []uint64, error) {
	count, err := s.store.CountAudience(ctx, a)
	if err != nil {
		return 0, nil, fmt.Errorf("preview: %w", err)
	}
	// A user has one or a few tokens: a page of 4n tokens holds n users
	// but for heavy multi-device users, and a short sample is fine then.
	page, err := s.store.AudiencePage(ctx, a, 0, math.MaxUint64, 4*n, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("preview: %w", err)
	}
	sample := make([]uint64, 0, n)
	for _, t := range page {
		if len(sample) < n && !slices.Contains(sample, t.UserID) {
			sample = append(sample, t.UserID)
		}
	}
	return count, sample, nil
}
