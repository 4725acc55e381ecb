package lease

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"pushfan/lease/codec"
	"pushfan/lease/outcome"
	"pushfan/lease/sends"
)

// A holder fenced off by a takeover (it stalled past its lease, and another
// instance claimed the chunk) did send the targets it had in flight and
// those it sent before its next checkpoint found the chunk gone. Its
// successor resumes from the stored cursor and sends them again, counting
// them itself: nothing is lost, they are duplicates. Unless a cancel ends
// the chunk first: the successor's close counts every target it has not
// reached canceled, although the fenced holder delivered some of them.
//
// So a fenced holder's checkpoints are not simply refused. While the chunk
// is open, the outcomes they carry are stored aside, target by target
// (fenced_sends), and the holder stops. When the chunk is closed by a
// cancel (a Done checkpoint with CancelRest), the close reads them: a
// target it would count canceled that a fenced holder sent is counted as
// that holder's outcome instead, and the close records the targets it did
// count canceled (late_holders.unsent) for a fenced holder that reports
// only later. Each target moves out of canceled at most once, because it
// leaves that set when it does; a target the successor reached keeps the
// successor's outcome. A chunk that completes without a cancel needs
// nothing of this: its successor sent everything again, and Finish drops
// what was stored aside.
//
// A fenced holder's failure rows and dead tokens are not written (the
// tokens are found dead again at their next send), and its frequency-cap
// reservations are its successor's to settle; only its counts are stored.

// OutcomeKind and TargetOutcome are package outcome's: what became of one
// target in a checkpoint.
type OutcomeKind = outcome.Kind
type TargetOutcome = outcome.Target

// The outcomes a checkpoint lists target by target.
const (
	OutcomeSucceeded = outcome.Succeeded
	OutcomeFailed    = outcome.Failed
	OutcomeCapped    = outcome.Capped
	OutcomeCanceled  = outcome.Canceled
	OutcomeStale     = outcome.Stale // passed over by PUSHFAN_STALE_AFTER: kept, not counted
)

// moved is what a fenced holder's outcomes change in the broadcast's counts.
type moved struct {
	succeeded, failed, capped int64
	errors                    map[string]int64
}

func (m moved) total() int64 { return m.succeeded + m.failed + m.capped }

func (m *moved) add(o moved) {
	m.succeeded += o.succeeded
	m.failed += o.failed
	m.capped += o.capped
	for code, n := range o.errors {
		if m.errors == nil {
			m.errors = map[string]int64{}
		}
		m.errors[code] += n
	}
}

// take counts the outcomes whose target lies in unsent, and returns unsent
// without them: a target counted here is never counted again. Capped
// outcomes count only withCapped (the holder at the close: a fenced
// holder's cap reservations were its successor's, so its capped targets
// stay canceled). Listed twice, a target counts as its first listing.
func take(unsent []Range, outs []TargetOutcome, withCapped bool) ([]Range, moved) {
	outs = byCursor(outs)
	m := moved{errors: map[string]int64{}}
	var hit []uint64
	for _, o := range outs {
		if o.Kind == OutcomeCapped && !withCapped {
			continue
		}
		if n := len(hit); n > 0 && hit[n-1] == o.Cursor {
			continue // listed twice (two rows of one holder): once
		}
		if !inRanges(unsent, o.Cursor) {
			continue
		}
		hit = append(hit, o.Cursor)
		switch o.Kind {
		case OutcomeSucceeded:
			m.succeeded++
		case OutcomeFailed:
			m.failed++
			m.errors[o.Code]++
		case OutcomeCapped:
			m.capped++
		}
	}
	return without(unsent, hit), m
}

// inRanges reports whether x lies in rs (sorted, disjoint).
func inRanges(rs []Range, x uint64) bool {
	i, _ := slices.BinarySearchFunc(rs, x, func(r Range, x uint64) int {
		switch {
		case r.Hi < x:
			return -1
		case r.Lo > x:
			return 1
		}
		return 0
	})
	return i < len(rs) && rs[i].Lo <= x && x <= rs[i].Hi
}

// without returns rs less the points xs (ascending).
func without(rs []Range, xs []uint64) []Range {
	if len(xs) == 0 {
		return rs
	}
	out := make([]Range, 0, len(rs)+len(xs))
	i := 0
	for _, r := range rs {
		for i < len(xs) && xs[i] < r.Lo {
			i++
		}
		lo, cut := r.Lo, false
		for i < len(xs) && xs[i] <= r.Hi {
			x := xs[i]
			i++
			if x > lo {
				out = append(out, Range{Lo: lo, Hi: x - 1})
			}
			if x == r.Hi {
				cut = true // and lo+1 would overflow at the top of the space
				break
			}
			lo = max(lo, x+1)
		}
		if !cut {
			out = append(out, Range{Lo: lo, Hi: r.Hi})
		}
	}
	return out
}

// unsentAtClose is what a close counts canceled: the targets in (cursor, hi]
// outside the stored ranges done that the closing checkpoint's own outcomes
// (succeeded, failed, capped) do not cover.
func unsentAtClose(cursor, hi uint64, done []Range, final []TargetOutcome) []Range {
	if cursor >= hi {
		return nil
	}
	var rs []Range
	lo := cursor + 1
	for _, d := range done {
		if d.Lo > lo {
			rs = append(rs, Range{Lo: lo, Hi: d.Lo - 1})
		}
		if d.Hi >= hi {
			lo = hi
			break
		}
		lo = d.Hi + 1
	}
	if lo <= hi && (len(done) == 0 || done[len(done)-1].Hi < hi) {
		rs = append(rs, Range{Lo: lo, Hi: hi})
	}
	xs := make([]uint64, 0, len(final))
	for _, o := range final {
		xs = append(xs, o.Cursor)
	}
	slices.Sort(xs)
	return without(rs, slices.Compact(xs))
}

// byCursor returns a copy of outs ascending by cursor, in their order
// where two name the same target.
func byCursor(outs []TargetOutcome) []TargetOutcome {
	outs = slices.Clone(outs)
	slices.SortStableFunc(outs, func(a, b TargetOutcome) int { return cmp.Compare(a.Cursor, b.Cursor) })
	return outs
}

// storeAside stores the sent outcomes of cp, from holder c fenced off by a
// takeover while the chunk is still open, for the chunk's close to read
// (see the top of this file). The row is keyed by c's epoch and the
// checkpoint's sequence, so a retry after a lost answer stores nothing
// twice.
func storeAside(ctx context.Context, tx *sql.Tx, c *Claim, cp Checkpoint, seq uint64, res *Result) error {
	// Kept as this holder's listing too: the reader ranks a target's
	// listings as the close counts them (outcomes.go, Precedence).
	outs, err := keepOutcomes(ctx, tx, c, seq, cp)
	if err != nil {
		return err
	}
	if b := outcome.EncodeSent(byCursor(outcome.SentOf(outs))); len(b) > 0 {
		if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO fenced_sends (broadcast_id, seq, epoch, ckpt_seq, outcomes) VALUES (?, ?, ?, ?, ?)",
			c.BroadcastID, c.Seq, c.Epoch, seq, b); err != nil {
			return fmt.Errorf("store a fenced holder's sends aside: %w", err)
		}
	}
	res.Fenced = true
	return nil
}

// closeFenced runs in a chunk's closing checkpoint with a cancel (Done,
// CancelRest) by c, when a takeover fenced off an earlier holder: the sends
// stored aside move out of what the close counts canceled (canceled), and
// what it still counts canceled is recorded for those holders' later
// reports (under c's epoch and closing sequence seq: a retry of the close
// after a lost answer is a replay). It returns what moves.
func closeFenced(ctx context.Context, tx *sql.Tx, c *Claim, seq, cursor uint64, stored []byte, final []TargetOutcome, canceled int64, now time.Time) (moved, error) {
	done, err := codec.DecodeRanges(cursor, stored)
	if err != nil {
		return moved{}, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	return closeUnsent(ctx, tx, c.Key, c.Epoch, seq, unsentAtClose(cursor, c.Hi, done, final), canceled, now)
}

// closeUnsent is the common part of a close of chunk k that a takeover
// changed hands: unsent are the targets the close counts canceled (of
// which canceled are real ones), the sends stored aside among them move,
// and what is left is recorded in late_holders under epoch, the holder at
// the close, and its checkpoint sequence ckptSeq. It returns what moves.
func closeUnsent(ctx context.Context, tx *sql.Tx, k Key, epoch, ckptSeq uint64, unsent []Range, canceled int64, now time.Time) (moved, error) {
	// A plain read, not a locking one: every writer of a chunk's rows
	// here holds the chunk row's lock, as the caller does, so none can
	// change under it; and a locking range read would take gap locks,
	// which an insert of another chunk's rows waits on while this
	// transaction goes on to insert into late_holders: the opposite
	// order of a fenced holder's checkpoint, a deadlock. Each row is then
	// deleted by its full key (a record lock).
	rows, err := tx.QueryContext(ctx, "SELECT epoch, ckpt_seq, outcomes FROM fenced_sends WHERE broadcast_id = ? AND seq = ? ORDER BY epoch, ckpt_seq", k.BroadcastID, k.Seq)
	if err != nil {
		return moved{}, fmt.Errorf("read fenced sends: %w", err)
	}
	type key struct{ epoch, seq uint64 }
	var keys []key
	var aside []TargetOutcome
	for rows.Next() {
		var kk key
		var b []byte
		if err := rows.Scan(&kk.epoch, &kk.seq, &b); err != nil {
			rows.Close()
			return moved{}, fmt.Errorf("read fenced sends: %w", err)
		}
		outs, err := outcome.DecodeSent(b)
		if err != nil {
			rows.Close()
			return moved{}, fmt.Errorf("chunk %d/%d: %w", k.BroadcastID, k.Seq, err)
		}
		keys = append(keys, kk)
		aside = append(aside, outs...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return moved{}, fmt.Errorf("read fenced sends: %w", err)
	}
	unsent, m := take(unsent, aside, false)
	for _, kk := range keys {
		if _, err := tx.ExecContext(ctx, "DELETE FROM fenced_sends WHERE broadcast_id = ? AND seq = ? AND epoch = ? AND ckpt_seq = ?",
			k.BroadcastID, k.Seq, kk.epoch, kk.seq); err != nil {
			return moved{}, fmt.Errorf("drop fenced sends: %w", err)
		}
	}
	enc, err := codec.EncodeSet(unsent)
	if err != nil {
		return moved{}, fmt.Errorf("chunk %d/%d: %w", k.BroadcastID, k.Seq, err)
	}
	rest := max(canceled-m.total(), 0)
	if _, err := tx.ExecContext(ctx, `INSERT INTO late_holders (broadcast_id, seq, epoch, ckpt_seq, rest, closed_at, unsent) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), ckpt_seq = VALUES(ckpt_seq), rest = VALUES(rest), closed_at = VALUES(closed_at), unsent = VALUES(unsent)`,
		k.BroadcastID, k.Seq, epoch, ckptSeq, rest, now, enc); err != nil {
		return moved{}, fmt.Errorf("record the fenced holders: %w", err)
	}
	return m, nil
}

// lateFenced stores what holder c reports after a close recorded the
// targets it counted canceled (unsent, rest of them real): its outcomes
// among them move out of canceled, and leave unsent, so a retry moves
// nothing again. ownSeq is 0 for a holder fenced off by a takeover before
// the close, which stores counts only; for the holder at the close it is
// its checkpoint's sequence, stored for replays, and its Effects run as
// for any late holder (failure rows, dead tokens, frequency caps).
func lateFenced(ctx context.Context, tx *sql.Tx, c *Claim, cp Checkpoint, unsentEnc []byte, rest int64, ownSeq uint64, res *Result) error {
	unsent, err := codec.DecodeSet(unsentEnc)
	if err != nil {
		return fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	if ownSeq > 0 && cp.Effects != nil {
		if res.Invalidated, err = cp.Effects(ctx, tx); err != nil {
			return err
		}
	}
	outs, err := keepOutcomes(ctx, tx, c, c.CkptSeq+1, cp) // a fenced holder's (ownSeq 0) too
	if err != nil {
		return err
	}
	unsent, m := take(unsent, outcome.SentOf(outs), ownSeq > 0)
	res.Late, res.CancelRequested = true, true
	fromCanceled := min(m.total(), rest)
	enc, err := codec.EncodeSet(unsent)
	if err != nil {
		return fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	set, args := "rest = rest - ?, unsent = ?", []any{fromCanceled, enc}
	if ownSeq > 0 {
		set += ", ckpt_seq = ?"
		args = append(args, ownSeq)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE late_holders SET "+set+" WHERE broadcast_id = ? AND seq = ?", append(args, c.BroadcastID, c.Seq)...); err != nil {
		return fmt.Errorf("fenced holder: %w", err)
	}
	if ownSeq > 0 {
		if res.Invalidated > 0 || cp.WriteBackFailures > 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET invalidated_tokens = invalidated_tokens + ?, writeback_failures = writeback_failures + ? WHERE id = ?",
				res.Invalidated, cp.WriteBackFailures, c.BroadcastID); err != nil {
				return fmt.Errorf("late holder's dead tokens: %w", err)
			}
		}
		// Its sends per variant, as any late holder's: they were sent,
		// whoever's outcome counts for a target. Not per platform: those
		// are counted beside the counters, which count only its outcomes
		// among unsent here (the campaigns read such a split as not exact).
		if err := sends.AddVariants(ctx, tx, c.BroadcastID, cp.Sends.Variants); err != nil {
			return err
		}
	}
	return applyMoved(ctx, tx, c.BroadcastID, m, fromCanceled)
}

// applyMoved adds the outcomes m, found among targets counted canceled, to
// broadcast id: fromCanceled of them taken out of canceled (the rest,
// beyond what was counted canceled, raise targeted).
func applyMoved(ctx context.Context, tx *sql.Tx, id uint64, m moved, fromCanceled int64) error {
	if m.total() == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET targeted = targeted + ?, succeeded = succeeded + ?, failed = failed + ?,
			capped = capped + ?, canceled = canceled - ? WHERE id = ?`,
		m.total()-fromCanceled, m.succeeded, m.failed, m.capped, fromCanceled, id); err != nil {
		return fmt.Errorf("move outcomes out of canceled: %w", err)
	}
	if err := AddErrorCounts(ctx, tx, id, m.errors); err != nil {
		return err
	}
	return addRate(ctx, tx, id, m.succeeded+m.failed)
}
