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
	// ErrNamed: the broadcast went to a named SQL audience whose query
	// does not return its cursor as token_id: the cursor need not be a
	// token id, so its kept outcomes name no token. The audience's later
	// broadcasts are listed once its query returns the cursor also as
	// token_id (package audience, ColTokenID).
	ErrNamed = errors.New("a named audience's outcomes name no token: its query does not return the cursor also as token_id")
)

// exportPage is how many target_outcomes rows one read takes (keyset
// paged: no statement stays open while the caller writes).
const exportPage = 200

// Export calls fn with every kept target of broadcast id, a chunk at a
// time in cursor order, each target once (its highest-precedence
// listing), only those of kind when it is not 0 (excluded and deferred:
// as the plan kept them; stale: as the runs passed them over). Without a
// kind it lists the targeted ones: its lines equal the broadcast's
// targeted. Memory holds one chunk's targets (PUSHFAN_CHUNK_WIDTH, 10,000
// by default), whatever the broadcast's size. The targets a cancel
// counted without reading them are read from the audience chunk by chunk
// as the export reaches them (rest.go).
func (r *Reader) Export(ctx context.Context, id uint64, kind outcome.Kind, fn func(Line) error) error {
	var aud, app string
	err := r.DB.QueryRowContext(ctx, "SELECT audience, app FROM broadcasts WHERE id = ?", id).Scan(&aud, &app)
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
	if a.Name != "" && !a.TokenCursor {
		return ErrNamed
	}
	e := exporter{r: r, id: id, app: app, kind: kind, fn: fn}
	if kind == 0 || kind == outcome.Canceled {
		if e.rests, err = r.rests(ctx, id); err != nil {
			return err
		}
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
				if err := e.flush(ctx, curSeq, chunk); err != nil {
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
			if !first {
				if err := e.flush(ctx, curSeq, chunk); err != nil {
					return err
				}
			}
			// The chunks a cancel closed before any of their targets
			// was kept: their rests alone.
			return e.flush(ctx, outcome.PlanSeq+1, nil)
		}
	}
}

// exporter writes one broadcast's export a chunk at a time.
type exporter struct {
	r     *Reader
	id    uint64
	app   string
	kind  outcome.Kind
	fn    func(Line) error
	rests []rest // the cancel's rests not yet written, by chunk
}

// flush writes chunk seq's targets (chunk: its kept listings), after the
// rests of the chunks before it that kept no listing: each target once,
// in cursor order, with its user (the app's tokens, a thousand at a time).
func (e *exporter) flush(ctx context.Context, seq uint64, chunk []outcome.Listing) error {
	for len(e.rests) > 0 && e.rests[0].seq < seq {
		if err := e.write(ctx, e.rests[0].seq, nil); err != nil { // takes the rest
			return err
		}
	}
	if seq > outcome.PlanSeq {
		return nil
	}
	return e.write(ctx, seq, chunk)
}

// write writes chunk seq: its listings ranked, its rest if a cancel kept
// one, and the kind asked for.
func (e *exporter) write(ctx context.Context, seq uint64, chunk []outcome.Listing) error {
	sortListings(chunk)
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
	if len(e.rests) > 0 && e.rests[0].seq == seq {
		var err error
		if out, err = e.r.restTargets(ctx, e.id, e.rests[0], out); err != nil {
			return err
		}
		e.rests = e.rests[1:]
	}
	switch e.kind {
	case 0:
		// A stale token was passed over, not targeted.
		out = slices.DeleteFunc(out, func(t outcome.Listing) bool { return t.Kind == outcome.Stale })
	default:
		out = slices.DeleteFunc(out, func(t outcome.Listing) bool { return t.Kind != e.kind })
	}
	for len(out) > 0 {
		batch := out[:min(1000, len(out))]
		out = out[len(batch):]
		ids := make([]uint64, len(batch))
		for i, t := range batch {
			ids[i] = t.Cursor
		}
		users, err := e.r.apps().TokenUsers(ctx, e.app, ids)
		if err != nil {
			return err
		}
		for _, t := range batch {
			if err := e.fn(Line{UserID: users[t.Cursor], TokenID: t.Cursor, Outcome: t.Kind.String(), Code: t.Code}); err != nil {
				return err
			}
		}
	}
	return nil
}
