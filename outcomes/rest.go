package outcomes

import (
	"context"
	"fmt"
	"slices"

	"pushfan/lease/codec"
	"pushfan/lease/outcome"
)

// A cancel counts a chunk's targets it never read from the plan and keeps
// them as one canceled_rests row per chunk (lease/outcome, rest.go: why
// not a listing per target). They are listed here, when asked: the
// chunk's audience above its stored cursor (or its fixed target list,
// for a local-time chunk) is read again, a page at a time, each target
// without a kept outcome being one of the rest, up to the count the cancel
// kept. That is what the run would have read next, so the export's lines
// add up to targeted and a user's device shows canceled. Read later, the
// audience can have changed: a token deleted or invalidated since the
// cancel is not found again (the export is short by it), one added since
// may take a place the count still allows; the count bounds the lines
// either way.

// rest is one canceled_rests row.
type rest struct {
	seq, lo, after, hi, n uint64
	list                  bool // a fixed target list: target_ids
}

// restPage is how many cursors one read of a rest's audience takes.
const restPage = 1000

// rests reads broadcast id's canceled_rests rows (a row per chunk a
// cancel closed with targets unread), by chunk.
func (r *Reader) rests(ctx context.Context, id uint64) ([]rest, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT seq, lo_id, after_id, hi_id, rest, target_ids IS NOT NULL
		FROM canceled_rests WHERE broadcast_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("read the canceled rests: %w", err)
	}
	defer rows.Close()
	var out []rest
	for rows.Next() {
		var x rest
		if err := rows.Scan(&x.seq, &x.lo, &x.after, &x.hi, &x.n, &x.list); err != nil {
			return nil, fmt.Errorf("read the canceled rests: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// restTargets appends to chunk the rest x of broadcast id as canceled
// listings: its never-read targets above the chunk's stored cursor that
// have no listing in chunk (sorted by cursor, one listing a cursor), at
// most x.n of them, and returns chunk sorted again.
func (r *Reader) restTargets(ctx context.Context, id uint64, x rest, chunk []outcome.Listing) ([]outcome.Listing, error) {
	kept := len(chunk)
	has := func(c uint64) bool {
		_, ok := slices.BinarySearchFunc(chunk[:kept], c, func(l outcome.Listing, c uint64) int {
			switch {
			case l.Cursor < c:
				return -1
			case l.Cursor > c:
				return 1
			}
			return 0
		})
		return ok
	}
	left := x.n
	add := func(c uint64) {
		if c > x.after && c <= x.hi && !has(c) && left > 0 {
			chunk = append(chunk, outcome.Listing{Target: outcome.Target{Cursor: c, Kind: outcome.Canceled}})
			left--
		}
	}
	if x.list {
		ids, err := r.restList(ctx, id, x)
		if err != nil {
			return chunk, err
		}
		for _, c := range ids {
			add(c)
		}
	} else {
		for after := x.after; left > 0 && after < x.hi; {
			cs, err := r.apps().AudienceRange(ctx, id, after, x.hi, restPage)
			if err != nil {
				return chunk, fmt.Errorf("read chunk %d/%d's never-read targets: %w", id, x.seq, err)
			}
			for _, c := range cs {
				add(c)
			}
			if len(cs) < restPage {
				break
			}
			after = cs[len(cs)-1]
		}
	}
	if len(chunk) > kept {
		sortListings(chunk)
	}
	return chunk, nil
}

// restList reads rest x's fixed target list (a local-time chunk's),
// ascending.
func (r *Reader) restList(ctx context.Context, id uint64, x rest) ([]uint64, error) {
	var b []byte
	if err := r.DB.QueryRowContext(ctx, "SELECT target_ids FROM canceled_rests WHERE broadcast_id = ? AND seq = ?", id, x.seq).Scan(&b); err != nil {
		return nil, fmt.Errorf("read chunk %d/%d's target list: %w", id, x.seq, err)
	}
	ids, err := codec.DecodeIDs(x.lo, b)
	if err != nil {
		return nil, fmt.Errorf("chunk %d/%d: %w", id, x.seq, err)
	}
	return ids, nil
}

// restHits reports which of the broadcasts ids (root, not resends) a
// cancel counted token tok of without reading it: a rest row whose range
// holds it, tok in the chunk's fixed list or in the audience read now
// (one cursor's range). The count is not checked here (the export's
// bound): a token the audience gained since the cancel can show canceled
// where the export, its count reached, leaves it out.
func (r *Reader) restHits(ctx context.Context, ids []uint64, tok uint64) (map[uint64]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := r.DB.QueryContext(ctx, "SELECT broadcast_id, seq, lo_id, after_id, hi_id, rest, target_ids IS NOT NULL FROM canceled_rests WHERE broadcast_id IN ("+
		marks(len(ids))+") AND after_id < ? AND hi_id >= ?", append(anys(ids), tok, tok)...)
	if err != nil {
		return nil, fmt.Errorf("read the canceled rests: %w", err)
	}
	type hit struct {
		id uint64
		x  rest
	}
	var cand []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.id, &h.x.seq, &h.x.lo, &h.x.after, &h.x.hi, &h.x.n, &h.x.list); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the canceled rests: %w", err)
		}
		cand = append(cand, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the canceled rests: %w", err)
	}
	out := map[uint64]bool{}
	for _, h := range cand {
		if h.x.list {
			ids, err := r.restList(ctx, h.id, h.x)
			if err != nil {
				return nil, err
			}
			if _, in := slices.BinarySearch(ids, tok); in {
				out[h.id] = true
			}
			continue
		}
		cs, err := r.apps().AudienceRange(ctx, h.id, tok-1, tok, 1)
		if err != nil {
			return nil, fmt.Errorf("look token %d up in broadcast %d's audience: %w", tok, h.id, err)
		}
		if len(cs) == 1 && cs[0] == tok {
			out[h.id] = true
		}
	}
	return out, nil
}

// sortListings sorts a chunk's listings by cursor, stably (equal cursors
// keep their order for the ranking).
func sortListings(chunk []outcome.Listing) {
	slices.SortStableFunc(chunk, func(a, b outcome.Listing) int {
		switch {
		case a.Cursor < b.Cursor:
			return -1
		case a.Cursor > b.Cursor:
			return 1
		}
		return 0
	})
}
