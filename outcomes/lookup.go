// Package outcomes reads every target's kept outcome (package lease,
// outcomes.go) for support: a user's recent broadcasts with each of their
// devices' outcome (GET /push/users/{id}/deliveries).
//
// How a user's deliveries are found without an index from user to
// broadcast: the cursor of the built-in audiences (all, user_ids, a
// segment, a resend) is the token id, so a user's token ids are their
// targets' cursors in every broadcast. The reader walks the broadcasts
// newest first, a page of pageSize at a time, and for each of the user's
// tokens runs one statement over the page (outcome.LookupQuery): per
// broadcast, the rows of hi in [token, token+MaxSpan] with lo at or below
// it, a bounded range of the (broadcast_id, hi, lo) index whatever the
// broadcast's size (outcome.MaxSpan bounds a row's span). A page costs
// tokens statements and reads, per broadcast and token, the index entries
// of MaxSpan cursors (27 rows of 2,400 targets for a dense audience, 13
// once the chunks' rows are merged: lease/outcome, merge.go) and
// decodes the one or two rows that hold the token. 100 broadcasts of 10M
// targets and a user with 3 devices: 3 statements, about 8,000 index
// entries and 300 blobs of 2.4 KB decoded (docs/outcomes.md).
//
// A named SQL audience chooses its own cursor (its query's `cursor`
// column), which need not be the token id. One whose query also returns
// the cursor as token_id says it is (package audience holds it to that),
// and its broadcasts record it (model.Audience.TokenCursor): they are
// looked up as the built-in audiences' are. The broadcasts of any other
// named audience are left out of a user's deliveries, and their export
// answers ErrNamed: their kept outcomes name no token.
package outcomes

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"pushfan/lease/outcome"
	"pushfan/model"
)

// Bounds of one lookup.
const (
	// pageSize is how many broadcasts one statement per token covers.
	pageSize = 100
	// DefaultScan is how many broadcasts a lookup walks at most before it
	// answers with what it found and where to go on (Page.NextAfter):
	// the bound of its cost, whatever the user.
	DefaultScan = 1000
	// MaxLimit caps ?limit.
	MaxLimit = 100
)

// Device is one of the user's devices (token) in a broadcast.
type Device struct {
	TokenID  uint64 `json:"token_id"`
	Platform string `json:"platform"`
	// Outcome is accepted, failed, capped, canceled, deferred, stale or
	// excluded; Code the failure's code ("" otherwise).
	Outcome string `json:"outcome"`
	Code    string `json:"code"`
	// ResendID is the resend whose outcome this is (the latest that
	// reached the token), 0 for the broadcast's own.
	ResendID  uint64     `json:"resend_id,omitempty"`
	OpenedAt  *time.Time `json:"opened_at"`
	ClickedAt *time.Time `json:"clicked_at"`
}

// Delivery is one broadcast that targeted the user.
type Delivery struct {
	BroadcastID uint64    `json:"broadcast_id"`
	Title       string    `json:"title"`
	Category    string    `json:"category"`
	At          time.Time `json:"at"`
	Devices     []Device  `json:"devices"`
}

// Page is a user's deliveries, newest first.
type Page struct {
	UserID     uint64     `json:"user_id"`
	Deliveries []Delivery `json:"deliveries"`
	// NextAfter, when set, is the ?after= of the next page: the limit was
	// reached, or the lookup walked its bound of broadcasts (Scanned).
	NextAfter *uint64 `json:"next_after"`
	// Scanned is how many broadcasts this lookup walked.
	Scanned int `json:"scanned"`
}

// Reader answers lookups from the database.
type Reader struct {
	DB *sql.DB
	// Scan bounds the broadcasts one lookup walks (DefaultScan when 0).
	Scan int
	// Apps reads the apps' token tables and audiences (apps.go); nil
	// reads the bundled device_tokens for every app, and cannot list a
	// cancel's never-read targets.
	Apps Apps
}

type broadcast struct {
	Delivery
	app   string
	named bool // a named audience whose cursor is not the token id
}

// Deliveries lists user's broadcasts with an id below after (0: from the
// newest), newest first, up to limit of them.
func (r *Reader) Deliveries(ctx context.Context, user uint64, limit int, after uint64) (Page, error) {
	page := Page{UserID: user, Deliveries: []Delivery{}}
	toks, err := r.apps().UserTokens(ctx, user)
	if err != nil || len(toks) == 0 {
		return page, err
	}
	scan := r.Scan
	if scan <= 0 {
		scan = DefaultScan
	}
	for page.Scanned < scan {
		want := min(pageSize, scan-page.Scanned)
		bs, err := r.broadcasts(ctx, after, want)
		if err != nil {
			return page, err
		}
		if len(bs) == 0 {
			return page, nil
		}
		found, err := r.devices(ctx, bs, toks)
		if err != nil {
			return page, err
		}
		for _, b := range bs {
			page.Scanned++
			after = b.BroadcastID
			if devs := found[b.BroadcastID]; len(devs) > 0 {
				b.Devices = devs
				page.Deliveries = append(page.Deliveries, b.Delivery)
				if len(page.Deliveries) == limit {
					next := b.BroadcastID
					page.NextAfter = &next
					return page, nil
				}
			}
		}
		if len(bs) < want {
			return page, nil
		}
	}
	next := after
	page.NextAfter = &next
	return page, nil
}

// broadcasts reads up to n broadcasts below after, newest first, that are
// not resends (a resend's outcomes show on its parent) and keep outcomes
// (or a cancel's rests: canceled before a target was kept).
func (r *Reader) broadcasts(ctx context.Context, after uint64, n int) ([]broadcast, error) {
	if after == 0 {
		after = 1<<63 - 1
	}
	rows, err := r.DB.QueryContext(ctx, `SELECT b.id, COALESCE(JSON_UNQUOTE(JSON_EXTRACT(b.message, '$.title')), ''), COALESCE(b.category, ''),
			COALESCE(b.started_at, b.created_at), b.audience, b.app
		FROM broadcasts b WHERE b.id < ? AND b.parent_id IS NULL
			AND (EXISTS (SELECT 1 FROM target_outcomes o WHERE o.broadcast_id = b.id)
				OR EXISTS (SELECT 1 FROM canceled_rests c WHERE c.broadcast_id = b.id))
		ORDER BY b.id DESC LIMIT ?`, after, n)
	if err != nil {
		return nil, fmt.Errorf("read broadcasts: %w", err)
	}
	defer rows.Close()
	var out []broadcast
	for rows.Next() {
		var b broadcast
		var aud string
		if err := rows.Scan(&b.BroadcastID, &b.Title, &b.Category, &b.At, &aud, &b.app); err != nil {
			return nil, fmt.Errorf("read broadcasts: %w", err)
		}
		var a model.Audience
		if err := json.Unmarshal([]byte(aud), &a); err != nil {
			return nil, fmt.Errorf("broadcast %d: audience: %w", b.BroadcastID, err)
		}
		b.named = a.Name != "" && !a.TokenCursor
		b.At = b.At.UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// devices looks each token up in the broadcasts bs and their resends, and
// returns each broadcast's devices that have an outcome, with their
// opens and clicks.
func (r *Reader) devices(ctx context.Context, bs []broadcast, toks []AppToken) (map[uint64][]Device, error) {
	var ids []uint64
	for _, b := range bs {
		if !b.named {
			ids = append(ids, b.BroadcastID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	parent, err := r.resends(ctx, ids)
	if err != nil {
		return nil, err
	}
	all := append([]uint64(nil), ids...)
	for child := range parent {
		all = append(all, child)
	}
	appOf := map[uint64]string{}
	for _, b := range bs {
		appOf[b.BroadcastID] = b.app
	}
	type key struct{ broadcast, token uint64 }
	got := map[key]Device{}
	for _, t := range toks {
		// A token of an app's table is looked up in that app's
		// broadcasts only: two apps' tables can hold the same id.
		mine, roots := all, ids
		if t.App != "" {
			mine, roots = nil, nil
			for _, id := range all {
				root := id
				if p, ok := parent[id]; ok {
					root = p
				}
				if appOf[root] == t.App {
					mine = append(mine, id)
					if root == id {
						roots = append(roots, id)
					}
				}
			}
			if len(mine) == 0 {
				continue
			}
		}
		outs, err := outcome.Lookup(ctx, r.DB, mine, t.ID)
		if err != nil {
			return nil, err
		}
		for id, o := range outs {
			root, resend := id, uint64(0)
			if p, ok := parent[id]; ok {
				root, resend = p, id
			}
			k := key{root, t.ID}
			// The latest resend that reached the token is its outcome.
			if d, seen := got[k]; seen && d.ResendID >= resend {
				continue
			}
			got[k] = Device{TokenID: t.ID, Platform: t.Platform, Outcome: o.Kind.String(), Code: o.Code, ResendID: resend}
		}
		// A broadcast canceled before it read the token kept no listing
		// of it, but a rest that holds it (rest.go); a deferred listing
		// (the plan's) ranks below that cancel, as in the export.
		var unlisted []uint64
		for _, id := range roots {
			if d, ok := got[key{id, t.ID}]; !ok || d.ResendID == 0 && d.Outcome == outcome.Deferred.String() {
				unlisted = append(unlisted, id)
			}
		}
		hits, err := r.restHits(ctx, unlisted, t.ID)
		if err != nil {
			return nil, err
		}
		for id := range hits {
			got[key{id, t.ID}] = Device{TokenID: t.ID, Platform: t.Platform, Outcome: outcome.Canceled.String()}
		}
	}
	if err := r.engagement(ctx, all, toks, parent, func(id, tok uint64, typ model.EventType, at time.Time) {
		d, ok := got[key{id, tok}]
		if !ok {
			return
		}
		at = at.UTC()
		switch typ {
		case model.EventOpened:
			if d.OpenedAt == nil || at.Before(*d.OpenedAt) {
				d.OpenedAt = &at
			}
		case model.EventClicked:
			if d.ClickedAt == nil || at.Before(*d.ClickedAt) {
				d.ClickedAt = &at
			}
		}
		got[key{id, tok}] = d
	}); err != nil {
		return nil, err
	}
	out := map[uint64][]Device{}
	for _, b := range bs {
		for _, t := range toks {
			if d, ok := got[key{b.BroadcastID, t.ID}]; ok {
				out[b.BroadcastID] = append(out[b.BroadcastID], d)
			}
		}
	}
	return out, nil
}

// resends maps each resend of the broadcasts ids, at any depth (a resend
// of a resend), to its root among ids.
func (r *Reader) resends(ctx context.Context, ids []uint64) (map[uint64]uint64, error) {
	root := map[uint64]uint64{}
	for _, id := range ids {
		root[id] = id
	}
	out := map[uint64]uint64{}
	for level := ids; len(level) > 0; {
		rows, err := r.DB.QueryContext(ctx, "SELECT id, parent_id FROM broadcasts WHERE parent_id IN ("+marks(len(level))+")", anys(level)...)
		if err != nil {
			return nil, fmt.Errorf("read resends: %w", err)
		}
		var next []uint64
		for rows.Next() {
			var id, p uint64
			if err := rows.Scan(&id, &p); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read resends: %w", err)
			}
			root[id] = root[p]
			out[id] = root[p]
			next = append(next, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read resends: %w", err)
		}
		level = next
	}
	return out, nil
}

// engagement calls fn with each open and click of the tokens in the
// broadcasts ids (a resend's under its root).
func (r *Reader) engagement(ctx context.Context, ids []uint64, toks []AppToken, parent map[uint64]uint64, fn func(id, tok uint64, typ model.EventType, at time.Time)) error {
	tids := make([]uint64, len(toks))
	for i, t := range toks {
		tids[i] = t.ID
	}
	q := "SELECT broadcast_id, target_id, type, at FROM engagement_events WHERE broadcast_id IN (" + marks(len(ids)) +
		") AND target_id IN (" + marks(len(tids)) + ") AND type IN (?, ?)"
	args := append(append(anys(ids), anys(tids)...), uint8(model.EventOpened), uint8(model.EventClicked))
	rows, err := r.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read opens and clicks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, tok uint64
		var typ uint8
		var at time.Time
		if err := rows.Scan(&id, &tok, &typ, &at); err != nil {
			return fmt.Errorf("read opens and clicks: %w", err)
		}
		if p, ok := parent[id]; ok {
			id = p
		}
		fn(id, tok, model.EventType(typ), at)
	}
	return rows.Err()
}

func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func anys(xs []uint64) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
