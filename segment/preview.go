package segment

import (
	"context"
	"encoding/json"
	"fmt"

	"pushfan/model"
)

// Preview is how many targets a filter selects now: tokens and distinct
// users under the audience rule, and a few of those users' ids. Exact is
// false for an estimate (repository.EstimateSegment: how it is made and
// how close it is).
type Preview struct {
	Tokens int64    `json:"tokens"`
	Users  int64    `json:"users"`
	Sample []uint64 `json:"sample"`
	Exact  bool     `json:"exact"`
}

// Preview counts the filter raw. It counts exactly when exact is asked
// or the tokens table is small (its largest id at most
// Options.SmallTable); on a bigger one it answers the estimate at once,
// and the caller asks again with exact for the count, which is bounded
// by Options.ExactTimeout (1M tokens count in about a second).
func (c *Catalog) Preview(ctx context.Context, raw json.RawMessage, exact bool) (Preview, error) {
	checked, err := c.CheckFilter(raw)
	if err != nil {
		return Preview{}, err
	}
	ref := model.SegmentRef{Name: "preview", Filter: checked}
	if !exact {
		ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
		defer cancel()
		hi, err := c.store.TokensMaxID(ctx)
		if err != nil {
			return Preview{}, fmt.Errorf("preview: %w", err)
		}
		if hi > c.opts.SmallTable {
			tokens, users, sample, err := c.store.EstimateSegment(ctx, ref, c.opts.Sample)
			if err != nil {
				return Preview{}, fmt.Errorf("preview: %w", err)
			}
			return Preview{Tokens: tokens, Users: users, Sample: sample}, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ExactTimeout)
	defer cancel()
	tokens, users, sample, err := c.store.CountSegment(ctx, ref, c.opts.Sample)
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	return Preview{Tokens: tokens, Users: users, Sample: sample, Exact: true}, nil
}
