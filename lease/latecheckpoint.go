package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/lease/sends"
)

// lateCheckpoint stores cp of a late holder: c's chunk was closed by a
// cancel (Stop) while c held it with an expired lease, and the close
// counted the targets without a stored outcome canceled. Some of them c
// did send since its last checkpoint (they reached FCM), so its
// checkpoints after the close still store their outcomes: succeeded,
// failed and capped are added and the same number taken out of canceled
// (the close's count of them is the row's rest; beyond it, an audience
// that grew since the plan, targeted grows). Its canceled and the rest
// (CancelRest) were counted by the close already. Effects run as for any
// checkpoint (failure rows, dead tokens, frequency-cap settling).
//
// The late_holders row is the fence: it is found only under the epoch the
// close moved the chunk past, and a chunk closed by a cancel is never
// claimed again, so nobody else can count these targets. A row of a chunk
// a takeover changed hands (unsent set) counts target by target instead,
// for every holder up to its epoch (fenced.go). It carries the holder's checkpoint
// sequence like a chunk row: a retry after a lost commit answer is a
// replay, so each outcome moves once. A checkpoint that ends the run
// (Done, Release) deletes the row. The broadcast may be final by then
// (Finish does not wait for late holders): its counts change after its
// broadcast.finished event, which carries those of the moment it
// finished (docs/reliability.md).
//
// It reports whether c is such a late holder; when it is not, the caller
// answers ErrLost.
func (s *Store) lateCheckpoint(ctx context.Context, tx *sql.Tx, c *Claim, cp Checkpoint, seq uint64, res *Result) (bool, error) {
	// A plain read first: a locking read of a missing row takes a gap
	// lock, which an insert of another chunk's row would wait on (a
	// deadlock with a close, fenced.go). Whoever inserts this chunk's row
	// holds the chunk row's lock, which the caller holds (or the chunk is
	// gone, and nobody inserts any more), so a row not seen here is not
	// there.
	var exists int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM late_holders WHERE broadcast_id = ? AND seq = ?", c.BroadcastID, c.Seq).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for a late holder: %w", err)
	}
	if exists == 0 {
		return false, nil
	}
	var stored, epoch uint64
	var rest int64
	var perTarget bool
	var unsent []byte
	err := tx.QueryRowContext(ctx, "SELECT ckpt_seq, rest, epoch, unsent IS NOT NULL, COALESCE(unsent, '') FROM late_holders WHERE broadcast_id = ? AND seq = ? FOR UPDATE",
		c.BroadcastID, c.Seq).Scan(&stored, &rest, &epoch, &perTarget, &unsent)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock late holder: %w", err)
	case perTarget:
		// A chunk a takeover changed hands, closed by a cancel: every
		// holder fenced off before the close may report, target by target
		// (fenced.go), and the holder at the close as any late holder.
		switch {
		case c.Epoch < epoch:
			return true, lateFenced(ctx, tx, c, cp, unsent, rest, 0, res)
		case c.Epoch > epoch || stored != seq && stored != c.CkptSeq:
			return false, nil
		case stored == seq:
			res.Replayed, res.CancelRequested = true, true
			return true, nil
		}
		return true, lateFenced(ctx, tx, c, cp, unsent, rest, seq, res)
	case epoch != c.Epoch:
		return false, nil
	case stored == seq:
		// The previous attempt committed and its answer was lost.
		res.Replayed, res.CancelRequested = true, true
		return true, nil
	case stored != c.CkptSeq:
		return false, nil
	}
	if cp.Effects != nil {
		if res.Invalidated, err = cp.Effects(ctx, tx); err != nil {
			return false, err
		}
	}
	if _, err := keepOutcomes(ctx, tx, c, seq, cp); err != nil {
		return false, err
	}
	moved := cp.Succeeded + cp.Failed + cp.Capped
	fromCanceled := min(moved, rest)
	if cp.End == KeepLease {
		_, err = tx.ExecContext(ctx, "UPDATE late_holders SET ckpt_seq = ?, rest = rest - ? WHERE broadcast_id = ? AND seq = ?",
			seq, fromCanceled, c.BroadcastID, c.Seq)
	} else {
		_, err = tx.ExecContext(ctx, "DELETE FROM late_holders WHERE broadcast_id = ? AND seq = ?", c.BroadcastID, c.Seq)
	}
	if err != nil {
		return false, fmt.Errorf("late holder: %w", err)
	}
	if moved > 0 || res.Invalidated > 0 || cp.WriteBackFailures > 0 {
		set, args := cp.Sends.PlatformSet()
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET targeted = targeted + ?, succeeded = succeeded + ?, failed = failed + ?,
				canceled = canceled - ?, invalidated_tokens = invalidated_tokens + ?, writeback_failures = writeback_failures + ?`+set+` WHERE id = ?`,
			append(append([]any{moved - fromCanceled, cp.Succeeded, cp.Failed, fromCanceled, res.Invalidated, cp.WriteBackFailures}, args...), c.BroadcastID)...); err != nil {
			return false, fmt.Errorf("move late outcomes out of canceled: %w", err)
		}
	}
	if err := AddErrorCounts(ctx, tx, c.BroadcastID, cp.Errors); err != nil {
		return false, err
	}
	if err := addCapped(ctx, tx, c.BroadcastID, cp.Capped); err != nil {
		return false, err
	}
	if err := sends.AddVariants(ctx, tx, c.BroadcastID, cp.Sends.Variants); err != nil {
		return false, err
	}
	if err := addRate(ctx, tx, c.BroadcastID, cp.Succeeded+cp.Failed); err != nil {
		return false, err
	}
	res.Late, res.CancelRequested = true, true
	return true, nil
}
