// Package outcome is every target's kept outcome (package lease keeps
// them, outcomes.go): what became of one target, the compact blob a
// target_outcomes row holds (one byte a target for a dense audience), and
// the bounded look-up of one target's rows.
//
// A target can be listed more than once in a broadcast: a holder fenced off
// by a takeover (or a late holder) sent it and its successor sent or
// canceled it again. The reader decides as the counters do (Precedence):
// a sent outcome (accepted, failed) beats a capped or canceled one, and
// among equals the later claim's. When a chunk ends, its rows are merged
// into a few that answer the same (merge.go).
package outcome

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pushfan/internal/platform/sqldb"
)

// Kind says what became of one target.
type Kind uint8

// The kinds. Succeeded, Failed and Capped are counted by the fenced-holder
// rules (lease, fenced.go); the others are kept, not counted there.
const (
	Succeeded Kind = iota + 1
	Failed
	Capped
	// Canceled: read from the audience, but a cancel (or the broadcast's
	// failure) stopped it before it was sent.
	Canceled
	// Deferred: quiet hours or the night window moved its send to a
	// later instant (a later chunk holds its final outcome).
	Deferred
	// Stale: its token was found invalid before the send.
	Stale
	// Excluded: its user had not consented to the category.
	Excluded
)

// Target is one target's outcome.
type Target struct {
	Cursor uint64
	Kind   Kind
	Code   string // the error code, for Failed
}

// String is the outcome's name in the API.
func (k Kind) String() string {
	switch k {
	case Succeeded:
		return "accepted"
	case Failed:
		return "failed"
	case Capped:
		return "capped"
	case Canceled:
		return "canceled"
	case Deferred:
		return "deferred"
	case Stale:
		return "stale"
	case Excluded:
		return "excluded"
	}
	return "unknown"
}

// ParseKind is String's inverse; false for an unknown name.
func ParseKind(s string) (Kind, bool) {
	for k := Succeeded; k <= Excluded; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Precedence ranks two listings of one target: the higher is its outcome.
// Sent outcomes rank above the others, as they do when a close counts a
// fenced holder's sends out of canceled.
func (k Kind) Precedence() int {
	switch k {
	case Succeeded, Failed:
		return 3
	case Capped:
		return 2
	case Canceled:
		return 1
	}
	return 0 // deferred (its later send, if any, wins), excluded, stale
}

// Sent reports whether k is counted by the fenced-holder rules.
func (k Kind) Sent() bool { return k == Succeeded || k == Failed || k == Capped }

// kindBits is how many low bits of a target's uvarint hold its kind (the
// kind less one: 0 is succeeded); the gap is shifted above them.
const kindBits = 3

// MaxSpan bounds hi - lo of one target_outcomes row: a checkpoint whose
// targets span more (a retry committed late, a local-time chunk's targets
// spread over the whole audience) is kept as several rows. So the rows
// that may hold cursor x are those of hi in [x, x+MaxSpan]: a bounded
// range of the (broadcast_id, hi, lo) index, whatever the broadcast's size.
const MaxSpan = 1 << 16

// Encode writes outs (ascending cursors, each at least lo) as the
// blob of a target_outcomes row whose range starts at lo: per target,
// uvarint(gap<<3 | kind-1), the gap from the previous cursor (lo for the
// first), and for a failure the code's length and bytes.
func Encode(lo uint64, outs []Target) []byte {
	buf := make([]byte, 0, len(outs)+len(outs)/8)
	prev := lo
	for _, o := range outs {
		gap := o.Cursor - prev
		buf = binary.AppendUvarint(buf, gap<<kindBits|uint64(o.Kind-1))
		if o.Kind == Failed {
			code := o.Code
			if code == "" {
				code = "UNKNOWN"
			}
			buf = binary.AppendUvarint(buf, uint64(len(code)))
			buf = append(buf, code...)
		}
		prev = o.Cursor
	}
	return buf
}

// Decode calls fn with each target of a blob written by
// Encode from lo, in cursor order, without building a list (an
// export streams a 10M broadcast's rows through it). fn returning false
// stops it.
func Decode(lo uint64, b []byte, fn func(Target) bool) error {
	prev := lo
	for len(b) > 0 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("target outcomes: corrupt blob")
		}
		b = b[k:]
		gap, kind := v>>kindBits, Kind(v&(1<<kindBits-1))+1
		if prev+gap < prev || kind > Excluded {
			return errors.New("target outcomes: corrupt blob")
		}
		prev += gap
		o := Target{Cursor: prev, Kind: kind}
		if kind == Failed {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return errors.New("target outcomes: corrupt blob")
			}
			o.Code = string(b[k : k+int(n)])
			b = b[k+int(n):]
		}
		if !fn(o) {
			return nil
		}
	}
	return nil
}

// Find looks cursor up in a blob written from lo, stopping at the
// first cursor above it.
func Find(lo uint64, b []byte, cursor uint64) (Target, bool, error) {
	var got Target
	found := false
	err := Decode(lo, b, func(o Target) bool {
		if o.Cursor == cursor {
			got, found = o, true
		}
		return o.Cursor < cursor
	})
	return got, found, err
}

// Listing is one target's outcome as the reader resolves it: the highest
// precedence of its listings, the later claim's among equals.
type Listing struct {
	Target
	// Epoch and CkptSeq are the listing's claim and checkpoint.
	Epoch, CkptSeq uint64
}

// Better reports whether l beats m as a target's outcome: the higher
// precedence, then the later claim, then the later checkpoint.
func (l Listing) Better(m Listing) bool {
	if p, q := l.Kind.Precedence(), m.Kind.Precedence(); p != q {
		return p > q
	}
	if l.Epoch != m.Epoch {
		return l.Epoch > m.Epoch
	}
	return l.CkptSeq > m.CkptSeq
}

// LookupQuery is the statement Lookup runs for n broadcasts: the
// rows whose (broadcast_id, hi, lo) index entries may hold a cursor, hi in
// [cursor, cursor+MaxSpan] and lo at or below it, a bounded range per
// broadcast. Its arguments are the ids, then cursor, cursor+MaxSpan,
// cursor.
func LookupQuery(n int) string {
	return `SELECT broadcast_id, epoch, ckpt_seq, lo, outcomes FROM target_outcomes FORCE INDEX (target_outcomes_hi)
		WHERE broadcast_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `) AND hi BETWEEN ? AND ? AND lo <= ?`
}

// Lookup returns the kept outcome of the target at cursor in each
// of the broadcasts ids that lists it (LookupQuery: one statement, decoding
// only the rows whose range holds the cursor). A broadcast with no row
// listing it is absent: the target was not in its audience, was never read
// before a cancel, or its outcomes are past retention.
func Lookup(ctx context.Context, q sqldb.Querier, ids []uint64, cursor uint64) (map[uint64]Target, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(ids)+3)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := q.QueryContext(ctx, LookupQuery(len(ids)), append(args, cursor, cursor+MaxSpan, cursor)...)
	if err != nil {
		return nil, fmt.Errorf("look outcomes up: %w", err)
	}
	defer rows.Close()
	best := map[uint64]Listing{}
	for rows.Next() {
		var id, lo uint64
		var l Listing
		var b []byte
		if err := rows.Scan(&id, &l.Epoch, &l.CkptSeq, &lo, &b); err != nil {
			return nil, fmt.Errorf("look outcomes up: %w", err)
		}
		o, ok, err := Find(lo, b, cursor)
		if err != nil {
			return nil, fmt.Errorf("broadcast %d: %w", id, err)
		}
		if !ok {
			continue
		}
		l.Target = o
		if m, seen := best[id]; !seen || l.Better(m) {
			best[id] = l
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look outcomes up: %w", err)
	}
	out := make(map[uint64]Target, len(best))
	for id, l := range best {
		out[id] = l.Target
	}
	return out, nil
}

// LookupOne is Lookup for one broadcast.
func LookupOne(ctx context.Context, q sqldb.Querier, id, cursor uint64) (Target, bool, error) {
	m, err := Lookup(ctx, q, []uint64{id}, cursor)
	o, ok := m[id]
	return o, ok, err
}

// PlanSeq is the chunk number of the rows a plan step keeps (its excluded
// and deferred targets), keyed by the step's cursor: no chunk has it.
const PlanSeq = 1<<32 - 1

// Holder names a target_outcomes row's writer: the chunk, the holder's
// claim epoch and its checkpoint sequence. It is the row's key, as
// fenced_sends' is, and rows are inserted with IGNORE: a replayed
// checkpoint keeps nothing twice.
type Holder struct{ BroadcastID, Seq, Epoch, CkptSeq uint64 }

// Keep writes outs (any order) as h's rows of target_outcomes (migration
// 00036), in the caller's transaction: one row, a few when they span more
// than MaxSpan, however many targets.
func Keep(ctx context.Context, tx sqldb.Execer, h Holder, outs []Target) error {
	if len(outs) == 0 {
		return nil
	}
	if !slices.IsSortedFunc(outs, cmpCursor) {
		outs = slices.Clone(outs)
		slices.SortStableFunc(outs, cmpCursor)
	}
	// Sparse targets (a local-time chunk's, over a large id space) may
	// need many rows: at most keepBatch a statement, within MySQL's
	// 65,535 placeholders.
	var args []any
	rows := 0
	insert := func() error {
		if rows == 0 {
			return nil
		}
		q := "INSERT IGNORE INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6)), ", rows), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("keep the targets' outcomes: %w", err)
		}
		args, rows = args[:0], 0
		return nil
	}
	for part, ts := range Split(outs, 0) {
		args = append(args, h.BroadcastID, h.Seq, h.Epoch, h.CkptSeq, part, ts[0].Cursor, ts[len(ts)-1].Cursor, len(ts), Encode(ts[0].Cursor, ts))
		if rows++; rows == keepBatch {
			if err := insert(); err != nil {
				return err
			}
		}
	}
	return insert()
}

// keepBatch is the most rows one insert of Keep writes.
const keepBatch = 1000

func cmpCursor(a, b Target) int {
	switch {
	case a.Cursor < b.Cursor:
		return -1
	case a.Cursor > b.Cursor:
		return 1
	}
	return 0
}

// SentOf returns the sent outcomes of outs (Kind.Sent): the ones the
// fenced-holder rules count.
func SentOf(outs []Target) []Target {
	for _, o := range outs {
		if !o.Kind.Sent() {
			return slices.DeleteFunc(slices.Clone(outs), func(o Target) bool { return !o.Kind.Sent() })
		}
	}
	return outs
}

// EncodeSent writes (for a fenced holder's sends, lease/fenced.go) the sent outcomes of outs (ascending cursors) as, per
// target, the uvarint gap from the previous cursor and the error code's
// length and bytes (length 0: succeeded; codes are never empty).
func EncodeSent(outs []Target) []byte {
	var buf []byte
	prev := uint64(0)
	for _, o := range outs {
		if o.Kind != Succeeded && o.Kind != Failed {
			continue
		}
		code := o.Code
		if o.Kind == Failed && code == "" {
			code = "UNKNOWN"
		}
		if o.Kind == Succeeded {
			code = ""
		}
		buf = binary.AppendUvarint(buf, o.Cursor-prev)
		buf = binary.AppendUvarint(buf, uint64(len(code)))
		buf = append(buf, code...)
		prev = o.Cursor
	}
	return buf
}

// DecodeSent is the inverse of EncodeSent.
func DecodeSent(b []byte) ([]Target, error) {
	var out []Target
	prev := uint64(0)
	for len(b) > 0 {
		gap, k1 := binary.Uvarint(b)
		if k1 <= 0 || prev+gap < prev {
			return nil, errors.New("fenced sends: corrupt list")
		}
		n, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || n > uint64(len(b)-k1-k2) {
			return nil, errors.New("fenced sends: corrupt list")
		}
		b = b[k1+k2:]
		prev += gap
		o := Target{Cursor: prev, Kind: Succeeded}
		if n > 0 {
			o.Kind, o.Code = Failed, string(b[:n])
		}
		b = b[n:]
		out = append(out, o)
	}
	return out, nil
}
