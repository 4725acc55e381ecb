package campaigns

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease/sends"
	"pushfan/model"
)

// Slice is one key's totals in a breakdown. A field is null where it is
// not stored for the key (Breakdown.NotStored and Note say why): targeted
// and reach for a variant or a platform (a chunk's plan counts targets,
// not their variants or platforms), succeeded and failed for a split the
// checkpoints did not count apart (a broadcast sent before they did),
// and the opens and clicks of a platform one of whose broadcasts has
// events whose platform is not known (platforms.go).
type Slice struct {
	Key        string `json:"key"`
	Broadcasts int64  `json:"broadcasts"`
	// Sent is what the engine sent: succeeded + failed.
	Sent      int64  `json:"sent"`
	Targeted  *int64 `json:"targeted"`
	Succeeded *int64 `json:"succeeded"`
	Failed    *int64 `json:"failed"`
	Opened    *int64 `json:"opened"`
	Clicked   *int64 `json:"clicked"`
	// Reach is succeeded ÷ targeted.
	Reach *float64 `json:"reach"`
	// SuccessRate is succeeded ÷ sent: of what was sent, what FCM
	// accepted (no targeted is needed, so a variant and a platform have it).
	SuccessRate *float64 `json:"success_rate"`
	// CTR is clicked ÷ succeeded.
	CTR *float64 `json:"ctr"`
	// ClicksPerSent is clicked ÷ sent.
	ClicksPerSent *float64 `json:"clicks_per_sent"`
}

// Breakdown is a dimension's slices, by key, and what the stored data
// cannot give for it.
type Breakdown struct {
	By   Dimension `json:"by"`
	Rows []Slice   `json:"rows"`
	// NotStored names the fields some or all rows leave null, and Note
	// says why, in a sentence.
	NotStored []string `json:"not_stored"`
	Note      string   `json:"note,omitempty"`
}

// Notes say what a dimension's rows cannot show exactly.
const (
	noteVariants = "a chunk's plan counts targets, not their variants, so a localized or A/B variant has a success rate (succeeded ÷ sent), not targeted or a reach"
	noteOldSplit = "; succeeded and failed are not split for broadcasts sent before pushfan counted them per variant, nor for one whose resend recovered some failures (the resend's successes are not split), so keys with such a broadcast leave them null"
)

// slice accumulates one key's slice.
type slice struct {
	Slice
	targeted, succeeded, failed, opened, clicked int64
	// What the key's broadcasts did not all store.
	noTargeted, noSplit, noEvents bool
	seen                          map[uint64]bool
}

func (s *slice) whole(b *sent) {
	s.count(b.id)
	s.Sent += b.succeeded + b.failed
	s.targeted += b.targeted
	s.succeeded += b.succeeded
	s.failed += b.failed
	s.opened += b.opened
	s.clicked += b.clicked
}

func (s *slice) count(id uint64) {
	if !s.seen[id] {
		s.seen[id] = true
		s.Broadcasts++
	}
}

func ptr[T any](v T) *T { return &v }

func (s *slice) done() Slice {
	out := s.Slice
	if !s.noEvents {
		out.Opened, out.Clicked, out.ClicksPerSent = ptr(s.opened), ptr(s.clicked), ptr(ratio(s.clicked, out.Sent))
	}
	if !s.noSplit {
		out.Succeeded, out.Failed, out.SuccessRate = ptr(s.succeeded), ptr(s.failed), ptr(ratio(s.succeeded, out.Sent))
		if !s.noEvents {
			out.CTR = ptr(ratio(s.clicked, s.succeeded))
		}
		if !s.noTargeted {
			out.Targeted, out.Reach = ptr(s.targeted), ptr(ratio(s.succeeded, s.targeted))
		}
	}
	return out
}

// slices is a breakdown being summed, by key.
type sliceSet map[string]*slice

func (ss sliceSet) at(key string) *slice {
	s := ss[key]
	if s == nil {
		s = &slice{Slice: Slice{Key: key}, seen: map[uint64]bool{}}
		ss[key] = s
	}
	return s
}

// Breakdown splits q's broadcasts by dim (see Slice and the package doc).
func (r *Reader) Breakdown(ctx context.Context, q Query, dim Dimension) (Breakdown, error) {
	out := Breakdown{By: dim, Rows: []Slice{}, NotStored: []string{}}
	bs, err := r.finished(ctx, q)
	if err != nil {
		return Breakdown{}, err
	}
	ss := sliceSet{}
	switch dim {
	case ByApp:
		for i := range bs {
			ss.at(bs[i].app).whole(&bs[i])
		}
	case ByPlatform:
		if err := r.byPlatform(ctx, bs, ss); err != nil {
			return Breakdown{}, err
		}
	default:
		if err := r.splitVariants(ctx, bs, dim, ss); err != nil {
			return Breakdown{}, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ss)) {
		out.Rows = append(out.Rows, ss[k].done())
	}
	slices.SortStableFunc(out.Rows, func(a, b Slice) int { return cmp.Compare(b.Sent, a.Sent) })
	out.NotStored, out.Note = notStored(dim, out.Rows)
	return out, nil
}

// notStored names the fields rows leave null, and the note that says why.
func notStored(dim Dimension, rows []Slice) ([]string, string) {
	null := map[string]bool{}
	unsplit, events := false, false
	for _, r := range rows {
		for name, isNull := range map[string]bool{"targeted": r.Targeted == nil, "succeeded": r.Succeeded == nil, "failed": r.Failed == nil,
			"opened": r.Opened == nil, "clicked": r.Clicked == nil, "reach": r.Reach == nil, "success_rate": r.SuccessRate == nil,
			"ctr": r.CTR == nil, "clicks_per_sent": r.ClicksPerSent == nil} {
			null[name] = null[name] || isNull
		}
		unsplit = unsplit || (dim == ByPlatform && r.Key == "") || r.Succeeded == nil
		events = events || (dim == ByPlatform && r.Key != "" && r.Opened == nil)
	}
	if dim == ByPlatform {
		return platformNotStored(events, unsplit)
	}
	var out []string
	for _, name := range []string{"targeted", "succeeded", "failed", "opened", "clicked", "reach", "success_rate", "ctr", "clicks_per_sent"} {
		if null[name] {
			out = append(out, name)
		}
	}
	switch {
	case len(out) == 0:
		return []string{}, ""
	case unsplit:
		return out, noteVariants + noteOldSplit
	}
	return out, noteVariants
}

// split is what a broadcast with variants stored: its sends per engine
// variant ("ko", "default", "short", "short:ko") and its opens and clicks
// per A/B and localized variant (indexes from 1; 0: none).
type split struct {
	targets map[string]sends.Sent
	// exact: every row counted succeeded and failed apart, and they add
	// up to the broadcast's own (see exact).
	exact  bool
	events map[[2]int]*[2]int64 // opened, clicked
	msg    model.Message
}

// exactFor says whether sp's split of succeeded and failed is b's: every
// row counted them (a row from before has targets only), they sum to b's
// succeeded (a fenced holder's moved sends are in b's, not in a row), no
// more than its failed (a target no variant fits fails under none), and
// no resend moved any of b's failures to its succeeded.
func (sp *split) exactFor(b *sent) bool {
	var ok, failed int64
	for _, n := range sp.targets {
		ok, failed = ok+n.Succeeded, failed+n.Failed
	}
	return sp.exact && b.recovered == 0 && ok == b.succeeded && failed <= b.failed
}

// splitVariants adds bs to ss by locale or A/B variant: a broadcast
// without variants whole under "" (none), the others by their variants.
func (r *Reader) splitVariants(ctx context.Context, bs []sent, dim Dimension, ss sliceSet) error {
	splits := map[uint64]*split{}
	for start := 0; start < len(bs); start += IDBatch {
		batch := bs[start:min(start+IDBatch, len(bs))]
		if err := r.readSplits(ctx, batch, splits); err != nil {
			return err
		}
	}
	for i := range bs {
		b := &bs[i]
		sp := splits[b.id]
		if sp == nil || (dim == ByVariant && len(sp.msg.Variants) == 0) {
			ss.at("").whole(b)
			continue
		}
		key := func(name string) string { // an engine variant's key
			ab, lang, cut := strings.Cut(name, ":")
			switch {
			case dim == ByVariant:
				return ab
			case cut:
				return lang
			case len(sp.msg.Variants) > 0:
				return "" // an A/B variant not localized
			default:
				return name
			}
		}
		exact := sp.exactFor(b)
		for name, n := range sp.targets {
			s := ss.at(key(name))
			s.count(b.id)
			s.noTargeted = true
			s.noSplit = s.noSplit || !exact
			s.Sent += n.Succeeded + n.Failed
			s.succeeded += n.Succeeded
			s.failed += n.Failed
		}
		for k, oc := range sp.events {
			s := ss.at(sp.eventKey(dim, k[0], k[1]))
			s.count(b.id)
			s.noTargeted = true
			s.opened += oc[0]
			s.clicked += oc[1]
		}
	}
	return nil
}

// eventKey is the key of the events of A/B variant ab and localized
// variant loc (both from 1; 0: none), by the names the message gives the
// indexes (the engine's order: message.VariantNames).
func (sp *split) eventKey(dim Dimension, ab, loc int) string {
	m := sp.msg
	if ab > 0 && ab <= len(m.Variants) {
		if dim == ByVariant {
			return m.Variants[ab-1].Name
		}
		m = m.Variants[ab-1].Message
	} else if dim == ByVariant {
		return ""
	}
	names := variantNames(m.Localized)
	if loc < 1 || loc > len(names) {
		return ""
	}
	return names[loc-1]
}

// variantNames are a localized message's variants in the engine's order:
// its languages sorted, the default last (broadcast/message.VariantNames,
// which sits above this package).
func variantNames(loc map[string]model.Localized) []string {
	if len(loc) == 0 {
		return nil
	}
	return append(slices.Sorted(maps.Keys(loc)), model.VariantDefault)
}

// readSplits reads the per-variant sends of bs, then the events and the
// messages of those that have some.
func (r *Reader) readSplits(ctx context.Context, bs []sent, into map[uint64]*split) error {
	args := make([]any, len(bs))
	for i := range bs {
		args[i] = bs[i].id
	}
	rows, err := r.DB.QueryContext(ctx, "SELECT broadcast_id, variant, targets, succeeded, failed FROM broadcast_variants WHERE broadcast_id IN ("+sqldb.InList(len(args))+")", args...)
	if err != nil {
		return fmt.Errorf("campaigns: read variant sends: %w", err)
	}
	var ids []any
	for rows.Next() {
		var (
			id        uint64
			name      string
			n, ok, nf int64
		)
		if err := rows.Scan(&id, &name, &n, &ok, &nf); err != nil {
			rows.Close()
			return fmt.Errorf("campaigns: read variant sends: %w", err)
		}
		sp := into[id]
		if sp == nil {
			sp = &split{targets: map[string]sends.Sent{}, exact: true, events: map[[2]int]*[2]int64{}}
			into[id] = sp
			ids = append(ids, id)
		}
		if ok+nf != n {
			// Counted before succeeded and failed were: its sends stand
			// as one count, all in failed here, so that Sent is right.
			sp.exact, ok, nf = false, 0, n
		}
		sp.targets[name] = sends.Sent{Succeeded: ok, Failed: nf}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaigns: read variant sends: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := r.readEvents(ctx, ids, into); err != nil {
		return err
	}
	return r.readMessages(ctx, ids, into)
}

func (r *Reader) readEvents(ctx context.Context, ids []any, into map[uint64]*split) error {
	args := append([]any{uint8(model.EventOpened), uint8(model.EventClicked)}, ids...)
	rows, err := r.DB.QueryContext(ctx, `SELECT broadcast_id, variant, localized, SUM(IF(type = ?, n, 0)), SUM(IF(type = ?, n, 0))
		FROM engagement_counts WHERE broadcast_id IN (`+sqldb.InList(len(ids))+`) GROUP BY broadcast_id, variant, localized`, args...)
	if err != nil {
		return fmt.Errorf("campaigns: read variant events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id              uint64
			ab, loc         int
			opened, clicked int64
		)
		if err := rows.Scan(&id, &ab, &loc, &opened, &clicked); err != nil {
			return fmt.Errorf("campaigns: read variant events: %w", err)
		}
		if opened == 0 && clicked == 0 {
			continue // received or dismissed only
		}
		into[id].events[[2]int{ab, loc}] = &[2]int64{opened, clicked}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaigns: read variant events: %w", err)
	}
	return nil
}

func (r *Reader) readMessages(ctx context.Context, ids []any, into map[uint64]*split) error {
	rows, err := r.DB.QueryContext(ctx, "SELECT id, message FROM broadcasts WHERE id IN ("+sqldb.InList(len(ids))+")", ids...)
	if err != nil {
		return fmt.Errorf("campaigns: read messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  uint64
			raw []byte
		)
		if err := rows.Scan(&id, &raw); err != nil {
			return fmt.Errorf("campaigns: read messages: %w", err)
		}
		if err := json.Unmarshal(raw, &into[id].msg); err != nil {
			return fmt.Errorf("campaigns: broadcast %d's message: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaigns: read messages: %w", err)
	}
	return nil
}
