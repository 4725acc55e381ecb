package reads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"pushfan/audience"
	"pushfan/broadcast/message"
	"pushfan/broadcast/rules"
	"pushfan/model"
	"pushfan/repository"
)

// PreviewCap is what of a broadcast request, besides its audience,
// decides the cap it would be sent under: a preview counts the users that
// cap would withhold.
type PreviewCap struct {
	// App is the app the broadcast would send for (rules.Spec.App): a built-in
	// audience counts its tokens, a named one must be its, and its caps
	// count its sends.
	App          string
	FrequencyCap *bool
	Class        string
	MaxRate      *float64
	DeliverOver  string
	DryRun       bool
	// Category is the request's category ("": its audience's or the
	// default): its consent decides who is counted.
	Category string
}

// Preview is what a broadcast to an audience would have now: its
// targets, a sample of its users, the cap it would be sent under, and
// how many of its users that cap would withhold (nil when none applies).
type Preview struct {
	Count int64
	// Users is how many users hold Count's targets (a user with two
	// devices is one user): the console shows both.
	Users int64
	// Stale is how many tokens the audience would have had but for the
	// stale rule (PUSHFAN_STALE_AFTER): left out of Count, as a broadcast
	// leaves them out; 0 while the rule is off.
	Stale  int64
	Sample []uint64
	Cap    rules.CapChoice
	Capped *int64
	// Category is the category the broadcast would be sent in (nil: none
	// configured), and ExcludedNoConsent the tokens of users it leaves out
	// for want of their consent to it (not in Count).
	Category          *model.Category
	ExcludedNoConsent int64
}

// Preview counts a bound named audience and samples up to n user ids,
// with its users the cap would withhold. The answer may be up to
// PreviewTTL old (previewCache).
func (r *Reader) Preview(ctx context.Context, b audience.Bound, q PreviewCap, n int) (Preview, error) {
	params, err := b.ParamsJSON()
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	return r.preview(ctx, model.Audience{Name: b.Audience().Name(), Params: params}, b, q, n)
}

// PreviewAudience validates an audience as a broadcast request would (the
// same field errors) and counts the targets a broadcast to it would have
// now, with up to n of their user ids and the users its cap would
// withhold. It sends and stores nothing: the console calls it as the
// operator types, so the answer may be up to PreviewTTL old
// (previewCache).
func (r *Reader) PreviewAudience(ctx context.Context, spec *rules.AudienceSpec, q PreviewCap, n int) (Preview, error) {
	a, _, err := r.opt.Rules.Audience(spec)
	if err != nil {
		return Preview{}, err
	}
	app, err := r.opt.Rules.AppOf(r.apps, q.App)
	if err != nil {
		return Preview{}, err
	}
	if seg := a.Segment; seg != nil {
		// The segment as a broadcast would be sent to it now.
		ref, err := r.store.SegmentCurrent(ctx, seg.Name)
		if errors.Is(err, repository.ErrNotFound) {
			return Preview{}, message.FieldErrorf("unknown_segment", "audience.segment", "no segment named %q (GET /push/segments lists them)", seg.Name)
		}
		if err != nil {
			return Preview{}, fmt.Errorf("preview: %w", err)
		}
		if err := app.Store.Schema().CheckSegment(ref); err != nil {
			return Preview{}, message.FieldErrorf("invalid_segment", "audience.segment", "segment %q cannot be sent to by app %s: %v", seg.Name, app.Name, err)
		}
		a.Segment = &ref
	}
	var bound audience.Bound
	if a.Name != "" {
		if bound, err = r.opt.Rules.Bind(a); err != nil {
			return Preview{}, err
		}
	}
	return r.preview(ctx, a, bound, q, n)
}

// preview answers a validated audience a (bound, when named) under the
// cap q gives it, from the cache: the key names the audience and the
// cap, so the count of capped users is cached with the count it was made
// along.
func (r *Reader) preview(ctx context.Context, a model.Audience, bound audience.Bound, q PreviewCap, n int) (Preview, error) {
	class, err := r.opt.Rules.Class(rules.Spec{Class: q.Class, MaxRate: q.MaxRate, DeliverOver: q.DeliverOver}, a)
	if err != nil {
		return Preview{}, err
	}
	app, err := r.opt.Rules.AppOf(r.apps, q.App)
	if err != nil {
		return Preview{}, err
	}
	if err := r.opt.Rules.AudienceApp(a, app.Name); err != nil {
		return Preview{}, err
	}
	cat, err := r.opt.Rules.CategoryOf(q.Category, a.Name)
	if err != nil {
		return Preview{}, err
	}
	var catName string
	if cat != nil {
		catName = cat.Name
	}
	choice := r.opt.Rules.CapChoice(rules.Spec{FrequencyCap: q.FrequencyCap, DryRun: q.DryRun, Category: catName}, a, class)
	windows, err := rules.CapWindows(choice.Spec, app.Name)
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	store := app.Store.ForCategory(cat)
	key := app.Name + " " + previewKey(a, n) + " cap=" + choice.Spec + " category=" + catName
	if a.Name != "" {
		// Each compile of a named audience is its own: a reload that
		// changed its SQL is not answered with the old SQL's count.
		key += fmt.Sprintf(" compiled=%p", bound.Audience())
	}
	got, err := r.previews.get(ctx, key, r.now(), func(ctx context.Context) (preview, error) {
		// A named audience's count pages through all of it: the same
		// budget as its own preview route.
		ctx, cancel := context.WithTimeout(ctx, 6*r.opt.DBTimeout)
		defer cancel()
		if a.Name != "" {
			return r.previewNamed(ctx, store, bound, windows, n)
		}
		return r.previewBuiltin(ctx, store, a, windows, n)
	})
	if err != nil {
		return Preview{}, err
	}
	return Preview{Count: got.count, Users: got.users, Stale: got.stale, Sample: got.sample, Cap: choice, Capped: got.capped, Category: cat, ExcludedNoConsent: got.noConsent}, nil
}

// previewNamed walks a named audience once, counting its targets and,
// under windows, the users holding every slot of one: a statement a page
// over the page's users (repository.CappedAmong), never one per target,
// as a broadcast's reservation reads the ledger. The capped users are
// kept (8 bytes each) to count a user whose devices lie in several pages
// once.
//
// With the stale rule on, each page's tokens are held to it against the
// tokens table (store.StaleTokens), as a broadcast's send holds them: the
// count leaves them out and stale counts them.
func (r *Reader) previewNamed(ctx context.Context, store *repository.Store, b audience.Bound, windows []repository.CapWindow, n int) (preview, error) {
	var stale, noConsent int64
	var keep func(context.Context, []audience.Row) ([]audience.Row, error)
	staleRule, consentRule := store.Schema().StaleRule(), store.Schema().ConsentRule()
	if staleRule || consentRule {
		var tokens []string
		var users []uint64
		keep = func(ctx context.Context, rows []audience.Row) ([]audience.Row, error) {
			if staleRule {
				tokens = tokens[:0]
				for _, row := range rows {
					tokens = append(tokens, row.Token)
				}
				out, err := store.StaleTokens(ctx, tokens)
				if err != nil {
					return rows, err
				}
				kept := rows[:0]
				for _, row := range rows {
					if !out[row.Token] {
						kept = append(kept, row)
					}
				}
				stale += int64(len(rows) - len(kept))
				rows = kept
			}
			if !consentRule {
				return rows, nil
			}
			// The category's consent, as a plan reads it: a statement a
			// page over the page's users (repository.Store.UserConsents).
			users = users[:0]
			for _, row := range rows {
				users = append(users, row.UserID)
			}
			ok, err := store.UserConsents(ctx, users)
			if err != nil {
				return rows, err
			}
			kept := rows[:0]
			for _, row := range rows {
				if ok[row.UserID]&repository.ConsentDay != 0 {
					kept = append(kept, row)
				}
			}
			noConsent += int64(len(rows) - len(kept))
			return kept, nil
		}
	}
	now := r.now()
	var capped []uint64
	// The users are kept (8 bytes each, compacted as pages come) to
	// count a user whose devices lie in several pages once, as the
	// capped users are.
	var users []uint64
	each := func(ctx context.Context, ids []uint64) error {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		users = append(users, ids...)
		if len(windows) == 0 {
			return nil
		}
		got, err := r.store.CappedAmong(ctx, windows, ids, now)
		capped = append(capped, got...)
		return err
	}
	count, sample, err := r.opt.Named.PreviewKeep(ctx, b, n, keep, each)
	if err != nil {
		return preview{}, err
	}
	slices.Sort(users)
	u := int64(len(slices.Compact(users)))
	if len(windows) == 0 {
		return preview{count: count, users: u, stale: stale, noConsent: noConsent, sample: sample}, nil
	}
	slices.Sort(capped)
	c := int64(len(slices.Compact(capped)))
	return preview{count: count, users: u, stale: stale, noConsent: noConsent, sample: sample, capped: &c}, nil
}

// previewBuiltin counts a built-in audience, samples up to n user ids,
// and under windows counts the users the caps would withhold (driven by
// the ledger's live slots: repository.CountCappedUsers).
func (r *Reader) previewBuiltin(ctx context.Context, store *repository.Store, a model.Audience, windows []repository.CapWindow, n int) (preview, error) {
	p, err := countBuiltin(ctx, store, a, n)
	if err != nil || len(windows) == 0 {
		return p, err
	}
	c, err := store.CountCappedUsers(ctx, a, windows, r.now())
	if err != nil {
		return preview{}, fmt.Errorf("preview: %w", err)
	}
	p.capped = &c
	return p, nil
}

// previewKey names a validated audience's preview of n users: its stored
// form, as a broadcast would keep it.
func previewKey(a model.Audience, n int) string {
	raw, _ := json.Marshal(a) // a model.Audience always encodes
	return strconv.Itoa(n) + " " + string(raw)
}

// countBuiltin counts a built-in audience, and the tokens the stale rule
// and the category's consent leave out of it (one scan), and samples up to
// n user ids.
func countBuiltin(ctx context.Context, store *repository.Store, a model.Audience, n int) (preview, error) {
	count, stale, noConsent, err := store.CountAudienceExcluded(ctx, a)
	if err != nil {
		return preview{}, fmt.Errorf("preview: %w", err)
	}
	users, err := store.CountAudienceUsers(ctx, a)
	if err != nil {
		return preview{}, fmt.Errorf("preview: %w", err)
	}
	// A user has one or a few tokens: a page of 4n tokens holds n users
	// but for heavy multi-device users, and a short sample is fine then.
	page, err := store.AudiencePage(ctx, a, 0, math.MaxUint64, 4*n, nil)
	if err != nil {
		return preview{}, fmt.Errorf("preview: %w", err)
	}
	sample := make([]uint64, 0, n)
	for _, t := range page {
		if len(sample) < n && !slices.Contains(sample, t.UserID) {
			sample = append(sample, t.UserID)
		}
	}
	return preview{count: count, users: users, stale: stale, noConsent: noConsent, sample: sample}, nil
}
