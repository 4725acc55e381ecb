package outcomes

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"pushfan/lease/outcome"
	"pushfan/model"
)

// Line is one target of a broadcast's export.
type Line struct {
	UserID  uint64 `json:"user_id"`
	TokenID uint64 `json:"token_id"`
	Outcome string `json:"outcome"`
	Code    string `json:"code"`
}

// Export errors.
var (
	ErrNotFound = errors.New("no such broadcast")
	// ErrNamed: the broadcast went to a named SQL audience, whose cursor
	// need not be a token id: its kept outcomes name no token.
	ErrNamed = errors.New("a named audience's outcomes name no token")
)

// exportPage is how many target_outcomes rows one read takes (keyset
// paged: no statement stays open while the caller writes).
const exportPage = 200

// Export calls fn with every kept target of broadcast id, a chunk at a
// time in cursor order, each target once (its highest-precedence
// listing), only those of kind when it is not 0 (excluded and deferred:
// as the plan kept them). Memory holds one chunk's
// targets (PUSHFAN_CHUNK_WIDTH, 10,000 by default), whatever the
// broadcast's size. Targets a cancel never read (counted from the plan)
// have no kept outcome and are not listed.
func (r *Reader) Export(ctx context.Context, id uint64, kind outcome.Kind, fn func(Line) error) error {
	var aud string
	err := r.DB.QueryRowContext(ctx, "SELECT audience FROM broadcasts WHERE id = ?", id).Scan(&aud)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("read broadcast %d: %w", id, err)
	}
	var a model.Audience
	if err := json.Unmarshal([]byte(aud), &a); err != nil {
		return fmt.Errorf("broadcast %d: audience: %w", id, err)
	}
	if a.Name != "" {
		return ErrNamed
	}
	type key struct{ seq, epoch, ckpt, part uint64 }
	var last key
	first := true
	var chunk []outcome.Listing
	curSeq := uint64(0)
	for {
		// The plan's rows (its excluded and deferred targets) are read
		// alone: an excluded target is not targeted, and a deferred one
		// has its outcome in its chunk.
		op := "<>"
		if kind == outcome.Excluded || kind == outcome.Deferred {
			op = "="
		}
		q := `SELECT seq, epoch, ckpt_seq, part, lo, outcomes FROM target_outcomes WHERE broadcast_id = ? AND seq ` + op + ` ?`
		args := []any{id, outcome.PlanSeq}
		if !first {
			q += ` AND (seq, epoch, ckpt_seq, part) > (?, ?, ?, ?)`
			args = append(args, last.seq, last.epoch, last.ckpt, last.part)
		}
		rows, err := r.DB.QueryContext(ctx, q+` ORDER BY seq, epoch, ckpt_seq, part LIMIT ?`, append(args, exportPage)...)
		if err != nil {
			return fmt.Errorf("read outcomes: %w", err)
		}
		n := 0
		for rows.Next() {
			var k key
			var lo uint64
			var b []byte
			if err := rows.Scan(&k.seq, &k.epoch, &k.ckpt, &k.part, &lo, &b); err != nil {
				rows.Close()
				return fmt.Errorf("read outcomes: %w", err)
			}
			n++
			if !first && k.seq != curSeq {
				if err := r.flush(ctx, chunk, kind, fn); err != nil {
					rows.Close()
					return err
				}
				chunk = chunk[:0]
			}
			first, last, curSeq = false, k, k.seq
			if err := outcome.Decode(lo, b, func(o outcome.Target) bool {
				chunk = append(chunk, outcome.Listing{Target: o, Epoch: k.epoch, CkptSeq: k.ckpt})
				return true
			}); err != nil {
				rows.Close()
				return fmt.Errorf("broadcast %d chunk %d: %w", id, k.seq, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read outcomes: %w", err)
		}
		if n < exportPage {
			return r.flush(ctx, chunk, kind, fn)
		}
	}
}

// flush writes one chunk's targets: each once, in cursor order, with its
// user (device_tokens, a thousand at a time).
func (r *Reader) flush(ctx context.Context, chunk []outcome.Listing, kind outcome.Kind, fn func(Line) error) error {
	slices.SortStableFunc(chunk, func(a, b outcome.Listing) int {
		switch {
		case a.Cursor < b.Cursor:
			return -1
		case a.Cursor > b.Cursor:
			return 1
		}
		return 0
	})
	out := chunk[:0]
	for _, t := range chunk {
		if n := len(out); n > 0 && out[n-1].Cursor == t.Cursor {
			if t.Better(out[n-1]) {
				out[n-1] = t
			}
			continue
		}
		out = append(out, t)
	}
	if kind != 0 {
		out = slices.DeleteFunc(out, func(t outcome.Listing) bool { return t.Kind != kind })
	}
	for len(out) > 0 {
		batch := out[:min(1000, len(out))]
		out = out[len(batch):]
		ids := make([]uint64, len(batch))
		for i, t := range batch {
			ids[i] = t.Cursor
		}
		users, err := r.usersOf(ctx, ids)
		if err != nil {
			return err
		}
		for _, t := range batch {
			if err := fn(Line{UserID: users[t.Cursor], TokenID: t.Cursor, Outcome: t.Kind.String(), Code: t.Code}); err != nil {
				return err
			}
		}
	}
	return nil
}

// usersOf maps token ids to their users (a token row deleted since maps
// to none: user 0).
func (r *Reader) usersOf(ctx context.Context, ids []uint64) (map[uint64]uint64, error) {
	rows, err := r.DB.QueryContext(ctx, "SELECT id, user_id FROM device_tokens WHERE id IN ("+marks(len(ids))+")", anys(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read the targets' users: %w", err)
	}
	defer rows.Close()
	m := make(map[uint64]uint64, len(ids))
	for rows.Next() {
		var id, u uint64
		if err := rows.Scan(&id, &u); err != nil {
			return nil, fmt.Errorf("read the targets' users: %w", err)
		}
		m[id] = u
	}
	return m, rows.Err()
}
