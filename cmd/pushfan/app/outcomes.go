package app

import (
	"context"
	"fmt"

	"pushfan/audience"
	"pushfan/outcomes"
	"pushfan/repository"
)

// outcomeApps reads for the kept outcomes (package outcomes) each app's
// own tokens table through its mapping, and a broadcast's audience as its
// runs read it (the app's store, the broadcast's category).
type outcomeApps struct {
	store *repository.Store
	names []string
	// named and catalog read a named audience whose cursor is the token
	// id (model.Audience.TokenCursor): its canceled rests are listed
	// from it as the run would read it.
	named   *audience.Runner
	catalog *audience.Catalog
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
	store := o.store.ForApp(b.App).ForCategory(b.Category)
	if b.Audience.Name != "" {
		return o.namedRange(ctx, store, b.Audience.Name, b.Audience.Params, after, upto, limit)
	}
	ts, err := store.AudiencePage(ctx, b.Audience, after, upto, limit, nil)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(ts))
	for i, t := range ts {
		out[i] = t.TokenID
	}
	return out, nil
}

// namedRange lists up to limit cursors of a named audience in (after,
// upto] as the run's pages read them (broadcast/run, namedSource): its
// rows, without the tokens the stale rule leaves out and the users
// without the category's consent, reading on while those left a page
// short (the caller stops at a short answer).
func (o outcomeApps) namedRange(ctx context.Context, store *repository.Store, name string, params []byte, after, upto uint64, limit int) ([]uint64, error) {
	if o.named == nil || o.catalog == nil {
		return nil, fmt.Errorf("named audience %q: this reader has no named audiences", name)
	}
	a, ok := o.catalog.Load().Get(name)
	if !ok {
		return nil, fmt.Errorf("named audience %q is not configured on this instance", name)
	}
	bound, err := a.BindJSON(params)
	if err != nil {
		return nil, err
	}
	var out []uint64
	var rows []audience.Row
	for len(out) < limit {
		if rows, err = o.named.Page(ctx, bound, after, upto, limit, rows); err != nil {
			return nil, err
		}
		var stale map[string]bool
		if store.Schema().StaleRule() && len(rows) > 0 {
			toks := make([]string, len(rows))
			for i, r := range rows {
				toks[i] = r.Token
			}
			if stale, err = store.StaleTokens(ctx, toks); err != nil {
				return nil, err
			}
		}
		var consent map[uint64]uint8
		if store.Schema().ConsentRule() && len(rows) > 0 {
			users := make([]uint64, len(rows))
			for i, r := range rows {
				users[i] = r.UserID
			}
			if consent, err = store.UserConsents(ctx, users); err != nil {
				return nil, err
			}
		}
		for _, r := range rows {
			if len(out) == limit {
				break
			}
			if stale[r.Token] || consent != nil && consent[r.UserID]&repository.ConsentDay == 0 {
				continue
			}
			out = append(out, r.Cursor)
		}
		if len(rows) < limit {
			break
		}
		after = rows[len(rows)-1].Cursor
	}
	return out, nil
}
