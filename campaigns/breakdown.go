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
	"pushfan/model"
)

// Slice is one key's totals in a breakdown. Targeted, Succeeded, Failed,
// Reach and CTR are null where they are not stored for the key: the
// checkpoints count a localized or A/B variant's sends (Sent, succeeded
// and failed together), never its successes apart.
type Slice struct {
	Key        string `json:"key"`
	Broadcasts int64  `json:"broadcasts"`
	// Sent is what the engine sent: succeeded + failed.
	Sent      int64    `json:"sent"`
	Targeted  *int64   `json:"targeted"`
	Succeeded *int64   `json:"succeeded"`
	Failed    *int64   `json:"failed"`
	Opened    int64    `json:"opened"`
	Clicked   int64    `json:"clicked"`
	Reach     *float64 `json:"reach"`
	CTR       *float64 `json:"ctr"`
	// ClicksPerSent is clicked ÷ sent, the one click ratio every key has.
	ClicksPerSent float64 `json:"clicks_per_sent"`
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
	notePlatform = "pushfan keeps no device platform per send: a token's platform may change or the token go, so sends, opens and clicks by platform cannot be counted exactly from stored data"
	noteVariants = "a localized or A/B variant's sends are counted (sent: succeeded and failed together), not its successes apart, so targeted, succeeded, failed, reach and CTR are shown only for keys whose broadcasts had no split"
)

// slice accumulates one key's slice.
type slice struct {
	Slice
	targeted, succeeded, failed int64
	partial                     bool // a part of a broadcast counted: its split is not stored
	seen                        map[uint64]bool
}

func (s *slice) whole(b *sent) {
	s.count(b.id)
	s.Sent += b.succeeded + b.failed
	s.targeted += b.targeted
	s.succeeded += b.succeeded
	s.failed += b.failed
	s.Opened += b.opened
	s.Clicked += b.clicked
}

func (s *slice) count(id uint64) {
	if !s.seen[id] {
		s.seen[id] = true
		s.Broadcasts++
	}
}

func (s *slice) done() Slice {
	out := s.Slice
	out.ClicksPerSent = ratio(out.Clicked, out.Sent)
	if !s.partial {
		reach, ctr := ratio(s.succeeded, s.targeted), ratio(s.Clicked, s.succeeded)
		out.Targeted, out.Succeeded, out.Failed, out.Reach, out.CTR = &s.targeted, &s.succeeded, &s.failed, &reach, &ctr
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
	if dim == ByPlatform {
		out.NotStored = []string{"broadcasts", "sent", "targeted", "succeeded", "failed", "opened", "clicked", "reach", "ctr", "clicks_per_sent"}
		out.Note = notePlatform
		return out, nil
	}
	bs, err := r.finished(ctx, q)
	if err != nil {
		return Breakdown{}, err
	}
	ss := sliceSet{}
	if dim == ByApp {
		for i := range bs {
			ss.at(bs[i].app).whole(&bs[i])
		}
	} else if err := r.splitVariants(ctx, bs, dim, ss); err != nil {
		return Breakdown{}, err
	}
	partial := false
	for _, k := range slices.Sorted(maps.Keys(ss)) {
		out.Rows = append(out.Rows, ss[k].done())
		partial = partial || ss[k].partial
	}
	slices.SortStableFunc(out.Rows, func(a, b Slice) int { return cmp.Compare(b.Sent, a.Sent) })
	if partial {
		out.NotStored = []string{"targeted", "succeeded", "failed", "reach", "ctr"}
		out.Note = noteVariants
	}
	return out, nil
}

// split is what a broadcast with variants stored: its sends per engine
// variant ("ko", "default", "short", "short:ko") and its opens and clicks
// per A/B and localized variant (indexes from 1; 0: none).
type split struct {
	targets map[string]int64
	events  map[[2]int]*[2]int64 // opened, clicked
	msg     model.Message
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
		for name, n := range sp.targets {
			s := ss.at(key(name))
			s.count(b.id)
			s.partial = true
			s.Sent += n
		}
		for k, oc := range sp.events {
			s := ss.at(sp.eventKey(dim, k[0], k[1]))
			s.count(b.id)
			s.partial = true
			s.Opened += oc[0]
			s.Clicked += oc[1]
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
	rows, err := r.DB.QueryContext(ctx, "SELECT broadcast_id, variant, targets FROM broadcast_variants WHERE broadcast_id IN ("+sqldb.InList(len(args))+")", args...)
	if err != nil {
		return fmt.Errorf("campaigns: read variant sends: %w", err)
	}
	var ids []any
	for rows.Next() {
		var (
			id   uint64
			name string
			n    int64
		)
		if err := rows.Scan(&id, &name, &n); err != nil {
			rows.Close()
			return fmt.Errorf("campaigns: read variant sends: %w", err)
		}
		sp := into[id]
		if sp == nil {
			sp = &split{targets: map[string]int64{}, events: map[[2]int]*[2]int64{}}
			into[id] = sp
			ids = append(ids, id)
		}
		sp.targets[name] += n
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
