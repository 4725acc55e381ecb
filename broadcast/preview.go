package broadcast

import (
	"context"
	"fmt"
	"math"
	"slices"

	"pushfan/audience"
)

// Preview counts a bound named audience and samples up to n user ids.
func (s *Service) Preview(ctx context.Context, b audience.Bound, n int) (int64, []uint64, error) {
	return s.opt.Named.Preview(ctx, b, n)
}

// PreviewAudience validates an audience as a broadcast request would (the
// same field errors) and counts the targets a broadcast to it would have
// now, with up to n of their user ids. It sends and stores nothing: the
// console calls it as the operator types.
func (s *Service) PreviewAudience(ctx context.Context, spec *AudienceSpec, n int) (int64, []uint64, error) {
	a, _, err := s.opt.Rules.audience(spec)
	if err != nil {
		return 0, nil, err
	}
	// A named audience's count pages through all of it: the same budget
	// as its own preview route.
	ctx, cancel := context.WithTimeout(ctx, 6*s.opt.DBTimeout)
	defer cancel()
	if a.Name != "" {
		bound, err := s.bind(a)
		if err != nil {
			return 0, nil, err
		}
		return s.opt.Named.Preview(ctx, bound, n)
	}
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
