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
	"pushfan/repository"
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
//
// app is the request's app (Spec.App): a built-in audience counts its
// tokens only, and a named audience must be its.
func (s *Service) PreviewAudience(ctx context.Context, app string, spec *AudienceSpec, n int) (int64, []uint64, error) {
	in, err := s.appOf(app)
	if err != nil {
		return 0, nil, err
	}
	a, _, err := s.opt.Rules.audience(spec)
	if err != nil {
		return 0, nil, err
	}
	if err := s.opt.Rules.audienceApp(a, in.Name); err != nil {
		return 0, nil, err
	}
	var bound audience.Bound
	if a.Name != "" {
		if bound, err = s.opt.Rules.bind(a); err != nil {
			return 0, nil, err
		}
	}
	return s.previews.get(ctx, in.Name+" "+previewKey(a, n), s.now(), func(ctx context.Context) (int64, []uint64, error) {
		// A named audience's count pages through all of it: the same
		// budget as its own preview route.
		ctx, cancel := context.WithTimeout(ctx, 6*s.opt.DBTimeout)
		defer cancel()
		if a.Name != "" {
			return s.opt.Named.Preview(ctx, bound, n)
		}
		return countBuiltin(ctx, in.Store, a, n)
	})
}

// previewKey names a validated audience's preview of n users: its stored
// form, as a broadcast would keep it.
func previewKey(a model.Audience, n int) string {
	raw, _ := json.Marshal(a) // a model.Audience always encodes
	return strconv.Itoa(n) + " " + string(raw)
}

// countBuiltin counts a built-in audience and samples up to n user ids.
func countBuiltin(ctx context.Context, store *repository.Store, a model.Audience, n int) (int64, []uint64, error) {
	count, err := store.CountAudience(ctx, a)
	if err != nil {
		return 0, nil, fmt.Errorf("preview: %w", err)
	}
	// A user has one or a few tokens: a page of 4n tokens holds n users
	// but for heavy multi-device users, and a short sample is fine then.
	page, err := store.AudiencePage(ctx, a, 0, math.MaxUint64, 4*n, nil)
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
