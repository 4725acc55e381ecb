package lease

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Every target's outcome is kept, not only counted, so that support can
// answer "did user 42 get Tuesday's push?" (a user's deliveries, a
// broadcast's export). A checkpoint's outcomes are written in its own
// transaction as one row of target_outcomes (migration 00036): the cursor
// range the checkpoint's targets span and, per target in cursor order, one
// uvarint holding the gap from the previous cursor and the outcome kind
// (codecOutcomes). A dense audience (token ids one apart) costs one byte a
// target; a failure adds its code. The row is keyed like fenced_sends, by
// the holder's epoch and checkpoint sequence, and inserted with IGNORE: a
// replayed checkpoint writes nothing twice.
//
// A target can be listed more than once in a broadcast: a holder fenced off
// by a takeover (or a late holder) sent it and its successor sent or
// canceled it again. The reader decides as the counters do (Precedence):
// a sent outcome (accepted, failed) beats a canceled or capped one, and
// among equals the later claim's.

// The outcomes a checkpoint lists beyond the sent ones (Outcomes of a
// Checkpoint): kept per target, not counted by the fenced-holder rules.
const (
	// OutcomeCanceled: read from the audience, but a cancel (or the
	// broadcast's failure) stopped it before it was sent.
	OutcomeCanceled OutcomeKind = iota + OutcomeCapped + 1
	// OutcomeDeferred: quiet hours or the night window moved its send
	// to a later instant (a later chunk holds its final outcome).
	OutcomeDeferred
	// OutcomeStale: its token was found invalid before the send.
	OutcomeStale
	// OutcomeExcluded: its user had not consented to the category.
	OutcomeExcluded
)

// String is the outcome's name in the API.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeSucceeded:
		return "accepted"
	case OutcomeFailed:
		return "failed"
	case OutcomeCapped:
		return "capped"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeDeferred:
		return "deferred"
	case OutcomeStale:
		return "stale"
	case OutcomeExcluded:
		return "excluded"
	}
	return "unknown"
}

// ParseOutcomeKind is String's inverse; false for an unknown name.
func ParseOutcomeKind(s string) (OutcomeKind, bool) {
	for k := OutcomeSucceeded; k <= OutcomeExcluded; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Precedence ranks two listings of one target: the higher is its outcome.
// Sent outcomes rank above the others, as they do when a close counts a
// fenced holder's sends out of canceled.
func (k OutcomeKind) Precedence() int {
	switch k {
	case OutcomeSucceeded, OutcomeFailed:
		return 2
	case OutcomeCapped:
		return 1
	}
	return 0
}

// sent reports whether k is counted by the fenced-holder rules.
func (k OutcomeKind) sent() bool {
	return k == OutcomeSucceeded || k == OutcomeFailed || k == OutcomeCapped
}

// kindBits is how many low bits of a target's uvarint hold its kind (the
// kind less one: 0 is succeeded); the gap is shifted above them.
const kindBits = 3

// EncodeOutcomes writes outs (ascending cursors, each at least lo) as the
// blob of a target_outcomes row whose range starts at lo: per target,
// uvarint(gap<<3 | kind-1), the gap from the previous cursor (lo for the
// first), and for a failure the code's length and bytes.
func EncodeOutcomes(lo uint64, outs []TargetOutcome) []byte {
	buf := make([]byte, 0, len(outs)+len(outs)/8)
	prev := lo
	for _, o := range outs {
		gap := o.Cursor - prev
		buf = binary.AppendUvarint(buf, gap<<kindBits|uint64(o.Kind-1))
		if o.Kind == OutcomeFailed {
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

// DecodeOutcomes calls fn with each target of a blob written by
// EncodeOutcomes from lo, in cursor order, without building a list (an
// export streams a 10M broadcast's rows through it). fn returning false
// stops it.
func DecodeOutcomes(lo uint64, b []byte, fn func(TargetOutcome) bool) error {
	prev := lo
	for len(b) > 0 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("target outcomes: corrupt blob")
		}
		b = b[k:]
		gap, kind := v>>kindBits, OutcomeKind(v&(1<<kindBits-1))+1
		if prev+gap < prev || kind > OutcomeExcluded {
			return errors.New("target outcomes: corrupt blob")
		}
		prev += gap
		o := TargetOutcome{Cursor: prev, Kind: kind}
		if kind == OutcomeFailed {
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

// FindOutcome looks cursor up in a blob written from lo, stopping at the
// first cursor above it.
func FindOutcome(lo uint64, b []byte, cursor uint64) (TargetOutcome, bool, error) {
	var got TargetOutcome
	found := false
	err := DecodeOutcomes(lo, b, func(o TargetOutcome) bool {
		if o.Cursor == cursor {
			got, found = o, true
		}
		return o.Cursor < cursor
	})
	return got, found, err
}

// MaxSpan bounds hi - lo of one target_outcomes row: a checkpoint whose
// targets span more (a retry committed late, a local-time chunk's targets
// spread over the whole audience) is kept as several rows. So the rows
// that may hold cursor x are those of hi in [x, x+MaxSpan]: a bounded
// range of the (broadcast_id, hi) index, whatever the broadcast's size.
const MaxSpan = 1 << 16

// keepOutcomes writes outs (any order) as holder c's rows for its
// checkpoint seq: one row (a few when they span more than MaxSpan),
// however many targets, in the caller's transaction.
func keepOutcomes(ctx context.Context, tx *sql.Tx, c *Claim, seq uint64, outs []TargetOutcome) error {
	if len(outs) == 0 {
		return nil
	}
	if !slices.IsSortedFunc(outs, cmpCursor) {
		outs = byCursor(outs)
	}
	var args []any
	rows := 0
	for part := 0; len(outs) > 0; part++ {
		lo := outs[0].Cursor
		n := 1
		for n < len(outs) && outs[n].Cursor-lo <= MaxSpan {
			n++
		}
		args = append(args, c.BroadcastID, c.Seq, c.Epoch, seq, part, lo, outs[n-1].Cursor, n, EncodeOutcomes(lo, outs[:n]))
		outs = outs[n:]
		rows++
	}
	q := "INSERT IGNORE INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6)), ", rows), ", ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("keep the targets' outcomes: %w", err)
	}
	return nil
}

func cmpCursor(a, b TargetOutcome) int {
	switch {
	case a.Cursor < b.Cursor:
		return -1
	case a.Cursor > b.Cursor:
		return 1
	}
	return 0
}

// allOutcomes returns every outcome cp lists, sent or not.
func allOutcomes(cp Checkpoint) []TargetOutcome {
	if cp.Outcomes == nil {
		return nil
	}
	return cp.Outcomes()
}
