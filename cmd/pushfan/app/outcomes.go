package app

import (
	"context"
	"fmt"

	"pushfan/outcomes"
	"pushfan/repository"
)

// outcomeApps reads for the kept outcomes (package outcomes) each app's
// own tokens table through its mapping, and a broadcast's audience as its
// runs read it (the app's store, the broadcast's category).
type outcomeApps struct {
	store *repository.Store
	names []string
}

func (o outcomeApps) UserTokens(ctx context.Context, user uint64) ([]outcomes.AppToken, error) {
	var out []outcomes.AppToken
	for _, app := range o.names {
		toks, err := o.store.ForApp(app).UserTokens(ctx, user)
		if err != nil {
			return nil, fmt.Errorf("app %s: %w", app, err)
		}
		for _, t := range toks {
			out = append(out, outcomes.AppToken{App: app, ID: t.ID, Platform: t.Platform})
		}
	}
	return out, nil
}

func (o outcomeApps) TokenUsers(ctx context.Context, app string, ids []uint64) (map[uint64]uint64, error) {
	return o.store.ForApp(app).TokenUsers(ctx, ids)
}

func (o outcomeApps) AudienceRange(ctx context.Context, id, after, upto uint64, limit int) ([]uint64, error) {
	b, err := o.store.GetBroadcast(ctx, id)
	if err != nil {
		return nil, err
	}
	ts, err := o.store.ForApp(b.App).ForCategory(b.Category).AudiencePage(ctx, b.Audience, after, upto, limit, nil)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(ts))
	for i, t := range ts {
		out[i] = t.TokenID
	}
	return out, nil
}
