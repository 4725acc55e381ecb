package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease/codec"
	"pushfan/lease/outcome"
	"pushfan/lease/sends"
)

// End says what a checkpoint does with the lease.
type End int

const (
	// KeepLease renews the lease: the run goes on.
	KeepLease End = iota
	// Done closes the chunk: every target has an outcome (Cursor is Hi).
	Done
	// Release hands the chunk back (shutdown, or a database too long
	// unreachable): another instance resumes it from Cursor at once
	// instead of waiting for the lease to expire.
	Release
)

// Checkpoint is one stored step of a claimed chunk: the outcomes that
// became known since the previous one, and where the chunk stands.
type Checkpoint struct {
	Cursor uint64  // every target at or below it has an outcome
	Done   []Range // targets above Cursor with an outcome
	// The outcomes' counters, added to the broadcast's.
	Succeeded, Failed, Canceled int64
	// Capped are the targets a frequency cap withheld: an outcome like
	// the others, added to the broadcast's capped.
	Capped int64
	Errors map[string]int64
	End    End
	Lease  time.Duration // renewal, for KeepLease
	// Effects writes what the outcomes carry beyond counters (failure rows,
	// dead tokens) inside the checkpoint's transaction and returns how many
	// tokens it invalidated. It runs only when the checkpoint is applied,
	// never for a replay; nil writes nothing. An error rolls the whole
	// checkpoint back.
	Effects func(ctx context.Context, tx *sql.Tx) (invalidated int64, err error)
	// WriteBackFailures counts the dead tokens whose Effects leave out
	// their write-back to the app's table (it kept failing), added to the
	// broadcast's writeback_failures.
	WriteBackFailures int64
	// Sends are the sent targets by variant and by platform, added to the
	// broadcast's beside Succeeded and Failed (package sends).
	Sends sends.Split
	// CancelRest, with End Done, counts the chunk's planned targets that
	// still have no outcome as canceled (the run was canceled or failed
	// before it read them): the plan's count tells how many, so nothing is
	// read from the audience.
	CancelRest bool
	// Outcomes lists the checkpoint's targets one by one with their
	// outcomes (succeeded, failed, capped, and those it keeps without
	// counting them here: canceled, deferred, stale, excluded). It is
	// called once per stored checkpoint, whose transaction keeps them as
	// one row (outcomes.go); the sent ones also count what a fenced
	// holder sent exactly (fenced.go). Cursors ascending is cheapest; any
	// order is sorted. Nil lists none: the checkpoint's targets are
	// counted but not kept one by one.
	Outcomes func() []TargetOutcome
	keepNone bool // Store.KeepNoOutcomes: Outcomes listed, not kept
}

// Result is what a checkpoint learned.
type Result struct {
	// CancelRequested: the broadcast was canceled or failed; stop.
	CancelRequested bool
	// Invalidated counts the tokens this checkpoint invalidated.
	Invalidated int64
	// Replayed: an earlier attempt of this checkpoint, whose answer was
	// lost, had committed; nothing was added again.
	Replayed bool
	// Rest is how many targets CancelRest counted canceled.
	Rest int64
	// Late: the chunk had been closed by a cancel while this claim's
	// lease was expired; the checkpoint's outcomes were stored all the
	// same, moved out of the canceled the close counted (see
	// lateCheckpoint). CancelRequested is set: the run stops.
	Late bool
	// Fenced, with ErrLost: another instance took the chunk over while
	// this claim's lease was expired; the checkpoint's sends were stored
	// aside, counted only if a cancel ends the chunk before the new holder
	// sends them again (fenced.go). The run stops, and its last
	// checkpoint (the sends still in flight) is stored aside too.
	Fenced bool
	// Outdated: a release built for a newer schema is migrating the
	// database, or has (ErrOutdated). The checkpoint was stored, but a
	// Done one as a Release: the chunk is handed back for the newer
	// release to end. The run stops and releases the chunk.
	Outdated bool
}

// Checkpoint stores cp for c in one transaction, conditional on c's epoch,
// and on success moves c to the stored state (Cursor, Done, CkptSeq).
//
// The checkpoint's sequence number is c.CkptSeq+1, so a retry of the same
// checkpoint after an unknown outcome (any error but ErrLost) names the
// same number. If the row already holds it, the first attempt committed:
// the retry adds nothing and reports Replayed. The caller must therefore
// retry exactly the same cp before checkpointing anything newer.
//
// ErrLost means the chunk is not c's any more: another claim took it (the
// epoch moved), or a cancel closed it. Nothing was stored as the chunk's;
// the caller stops. With Result.Fenced, the sends were stored aside for a
// cancel's close to count (fenced.go).
func (s *Store) Checkpoint(ctx context.Context, c *Claim, cp Checkpoint) (Result, error) {
	if cp.End == Done && (cp.Cursor != c.Hi || len(cp.Done) > 0) {
		return Result{}, fmt.Errorf("checkpoint chunk %d/%d: a done chunk ends at its upper bound %d with no ranges, got cursor %d and %d ranges",
			c.BroadcastID, c.Seq, c.Hi, cp.Cursor, len(cp.Done))
	}
	if cp.Cursor < c.Cursor {
		return Result{}, fmt.Errorf("checkpoint chunk %d/%d: cursor %d is behind the stored %d", c.BroadcastID, c.Seq, cp.Cursor, c.Cursor)
	}
	done, err := codec.EncodeRanges(cp.Cursor, cp.Done)
	if err != nil {
		return Result{}, fmt.Errorf("checkpoint chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	seq := c.CkptSeq + 1
	cp.keepNone = s.keepNone
	var res Result
	err = sqldb.InTx(ctx, s.db, s.log, "checkpoint chunk", func(tx *sql.Tx) error {
		res = Result{}
		// A release older than the schema stores what it sent, and hands
		// the chunk back rather than end it: ending it is the newer
		// release's, with the bookkeeping it knows (schema.go).
		old, err := s.behind(ctx, tx)
		if err != nil {
			return err
		}
		cp := cp
		if res.Outdated = old; old && cp.End == Done {
			cp.End, cp.CancelRest = Release, false
		}
		var epoch, stored, fencedEpoch, cursor uint64
		var status string
		var invalidated, targets, before int64
		var storedDone []byte
		err = tx.QueryRowContext(ctx, `SELECT epoch, ckpt_seq, status, ckpt_invalidated, COALESCE(targets, -1), committed,
				COALESCE(fenced_epoch, 0), cursor_id, done_ranges
			FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ? FOR UPDATE`,
			c.BroadcastID, c.Seq).Scan(&epoch, &stored, &status, &invalidated, &targets, &before, &fencedEpoch, &cursor, &storedDone)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if late, err := s.lateCheckpoint(ctx, tx, c, cp, seq, &res); late || err != nil {
				return err
			}
			return fmt.Errorf("chunk row gone (the broadcast finished): %w", ErrLost)
		case err != nil:
			return fmt.Errorf("lock chunk: %w", err)
		case epoch != c.Epoch:
			if late, err := s.lateCheckpoint(ctx, tx, c, cp, seq, &res); late || err != nil {
				return err
			}
			if status != StatusDone && c.Epoch <= fencedEpoch {
				// Taken over while the chunk is still open: what this
				// holder sent is kept for a cancel's close (fenced.go).
				return storeAside(ctx, tx, c, cp, seq, &res)
			}
			return fmt.Errorf("claimed at epoch %d, the chunk is at %d: %w", c.Epoch, epoch, ErrLost)
		case stored == seq:
			// The previous attempt committed and its answer was lost.
			res.Replayed, res.Invalidated = true, invalidated
			return readCancel(ctx, tx, c.BroadcastID, &res)
		case stored != c.CkptSeq:
			return fmt.Errorf("checkpoint %d, but the chunk stored %d at the same epoch: %w", seq, stored, ErrLost)
		case status != StatusLeased:
			return fmt.Errorf("chunk is %s: %w", status, ErrLost)
		}
		if cp.Effects != nil {
			if res.Invalidated, err = cp.Effects(ctx, tx); err != nil {
				return err
			}
		}
		outs, err := keepOutcomes(ctx, tx, c, seq, cp)
		if err != nil {
			return err
		}
		if cp.End == Done && !cp.keepNone { // the chunk's rows folded into a few (lease/outcome, merge.go)
			if _, _, err := outcome.Merge(ctx, tx, c.BroadcastID, uint64(c.Seq)); err != nil {
				return err
			}
		}
		canceled := cp.Canceled
		if cp.End == Done && cp.CancelRest && targets >= 0 {
			res.Rest = max(targets-before-cp.Succeeded-cp.Failed-cp.Canceled-cp.Capped, 0)
			canceled += res.Rest
			if err := outcome.KeepRest(ctx, tx, c.BroadcastID, uint64(c.Seq), res.Rest); err != nil {
				return err
			}
		}
		// A cancel closing a chunk that changed hands by a takeover: what
		// the fenced holders sent is counted as sent, not canceled.
		var fenced moved
		if cp.End == Done && cp.CancelRest && fencedEpoch > 0 {
			if cp.Outcomes == nil && cp.Succeeded+cp.Failed+cp.Capped > 0 {
				// Its own outcomes would look unsent, and a fenced holder's
				// copies of them would count twice.
				return fmt.Errorf("checkpoint chunk %d/%d: closing a chunk a takeover changed hands needs its outcomes listed (Checkpoint.Outcomes)", c.BroadcastID, c.Seq)
			}
			var now time.Time
			if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
				return fmt.Errorf("read the database clock: %w", err)
			}
			if fenced, err = closeFenced(ctx, tx, c, seq, cursor, storedDone, outcome.SentOf(outs), canceled, now); err != nil {
				return err
			}
		}
		committed := cp.Succeeded + cp.Failed + canceled + cp.Capped
		// targeted is the planned count until the broadcast finishes: a
		// chunk whose audience grew after it was planned (a named audience's
		// rows) raises it, so it is never below what has an outcome.
		var grew int64
		if targets >= 0 && before+committed > targets {
			grew = before + committed - max(targets, before)
		}
		// The first checkpoint of a chunk an instance could run clears a
		// hand-back mark (see HandBack).
		set := "cursor_id = ?, done_ranges = ?, ckpt_seq = ?, ckpt_invalidated = ?, committed = committed + ?, targets = IF(targets IS NULL, NULL, targets + ?), refused_at = NULL, refusal = NULL, "
		args := []any{cp.Cursor, done, seq, res.Invalidated, committed, grew}
		switch cp.End {
		case KeepLease:
			set += "lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND"
			args = append(args, cp.Lease.Microseconds())
		case Done:
			// A done chunk's target list is read by nothing again: dropping
			// it keeps a local-time broadcast's 1–2 bytes per target from
			// staying for the retention period.
			set += "status = 'done', done_by = lease_owner, target_ids = NULL, lease_owner = NULL, lease_until = NULL, claim_token = NULL"
		case Release:
			set += "status = 'pending', lease_owner = NULL, lease_until = NULL, claim_token = NULL"
		}
		args = append(args, c.BroadcastID, c.Seq)
		if _, err := tx.ExecContext(ctx, "UPDATE broadcast_chunks SET "+set+" WHERE broadcast_id = ? AND seq = ?", args...); err != nil {
			return fmt.Errorf("update chunk: %w", err)
		}
		closed := 0
		if cp.End == Done {
			closed = 1
		}
		if grew != 0 || closed != 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET targeted = targeted + ?, open_chunks = GREATEST(CAST(open_chunks AS SIGNED) - ?, 0) WHERE id = ?",
				grew, closed, c.BroadcastID); err != nil {
				return fmt.Errorf("chunk counts: %w", err)
			}
		}
		if err := addCounts(ctx, tx, c.BroadcastID, cp.Succeeded, cp.Failed, canceled, res.Invalidated, cp.WriteBackFailures, cp.Errors, cp.Sends); err != nil {
			return err
		}
		if err := applyMoved(ctx, tx, c.BroadcastID, fenced, min(fenced.total(), canceled)); err != nil {
			return err
		}
		if err := addCapped(ctx, tx, c.BroadcastID, cp.Capped); err != nil {
			return err
		}
		if err := sends.AddVariants(ctx, tx, c.BroadcastID, cp.Sends.Variants); err != nil {
			return err
		}
		if err := addRate(ctx, tx, c.BroadcastID, cp.Succeeded+cp.Failed); err != nil {
			return err
		}
		return readCancel(ctx, tx, c.BroadcastID, &res)
	})
	if err != nil {
		if errors.Is(err, ErrLost) {
			return Result{}, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
		}
		return Result{}, err
	}
	if res.Fenced {
		// Stored aside, not as the chunk's: the holder has lost it all the
		// same. The sequence moves on, so its next checkpoint (the rest of
		// its in-flight sends) is stored aside too, not taken for a replay.
		c.CkptSeq = seq
		return res, fmt.Errorf("chunk %d/%d taken over at epoch %d; %d sends stored aside: %w", c.BroadcastID, c.Seq, c.Epoch, cp.Succeeded+cp.Failed, ErrLost)
	}
	c.Cursor, c.Done, c.CkptSeq = cp.Cursor, cp.Done, seq
	return res, nil
}

// Column widths, kept in Go so strict SQL mode never rejects a checkpoint
// over an over-long code or reason.
const (
	maxCodeRunes    = 64  // broadcast_errors.code
	maxRefusalBytes = 255 // broadcast_chunks.refusal
)

// RateBucket is the width of a send_rate row.
const RateBucket = 5 * time.Second

// addRate adds n outcomes to broadcast id's send rate, in the bucket of
// now: the series a console page opened late draws from.
func addRate(ctx context.Context, tx *sql.Tx, id uint64, n int64) error {
	if n <= 0 {
		return nil
	}
	at := time.Now().UTC().Truncate(RateBucket)
	if _, err := tx.ExecContext(ctx, "INSERT INTO send_rate (broadcast_id, at, n) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)", id, at, n); err != nil {
		return fmt.Errorf("send rate: %w", err)
	}
	return nil
}

func readCancel(ctx context.Context, tx *sql.Tx, id uint64, res *Result) error {
	if err := tx.QueryRowContext(ctx, "SELECT cancel_requested FROM broadcasts WHERE id = ?", id).Scan(&res.CancelRequested); err != nil {
		return fmt.Errorf("read cancel flag: %w", err)
	}
	return nil
}

// addCounts adds outcome counters, and the sends per platform in the same
// statement, to a broadcast. It is the only writer of the counters besides
// Stop, and runs in the same transaction as the chunk row that records
// them, so they are never added twice.
func addCounts(ctx context.Context, tx *sql.Tx, id uint64, succeeded, failed, canceled, invalidated, writeBackFailures int64, errs map[string]int64, split sends.Split) error {
	if succeeded != 0 || failed != 0 || canceled != 0 || invalidated != 0 || writeBackFailures != 0 {
		set, args := split.PlatformSet()
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET succeeded = succeeded + ?, failed = failed + ?,
			canceled = canceled + ?, invalidated_tokens = invalidated_tokens + ?, writeback_failures = writeback_failures + ?`+set+` WHERE id = ?`,
			append(append([]any{succeeded, failed, canceled, invalidated, writeBackFailures}, args...), id)...); err != nil {
			return fmt.Errorf("add counters: %w", err)
		}
	}
	return AddErrorCounts(ctx, tx, id, errs)
}

// addCapped adds n capped targets to broadcast id, beside the other
// outcomes of the same checkpoint.
func addCapped(ctx context.Context, tx *sql.Tx, id uint64, n int64) error {
	if n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET capped = capped + ? WHERE id = ?", n, id); err != nil {
		return fmt.Errorf("add capped: %w", err)
	}
	return nil
}

// AddErrorCounts upserts per-code failure counts of broadcast id in one
// statement. Codes are sorted so concurrent transactions lock the
// (broadcast_id, code) keys in the same order. Codes longer than 64
// characters are cut.
func AddErrorCounts(ctx context.Context, tx sqldb.Execer, id uint64, errs map[string]int64) error {
	codes := make([]string, 0, len(errs))
	for _, code := range slices.Sorted(maps.Keys(errs)) {
		if errs[code] != 0 {
			codes = append(codes, code)
		}
	}
	if len(codes) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(codes))
	for _, code := range codes {
		args = append(args, id, sqldb.ClampRunes(code, maxCodeRunes), errs[code])
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO broadcast_errors (broadcast_id, code, count) VALUES "+
		sqldb.Placeholders(len(codes), 3)+" ON DUPLICATE KEY UPDATE count = count + VALUES(count)", args...)
	if err != nil {
		return fmt.Errorf("upsert error counts: %w", err)
	}
	return nil
}

// HandBack returns a chunk that this instance cannot run (its
// configuration lacks the broadcast's named audience, say, in the middle of
// a rolling deploy) to the pending queue for another instance, and reports
// for how long no instance has been able to run it (by the database's
// clock: instances' clocks need not agree). A checkpoint by an instance
// that can run it clears that time.
func (s *Store) HandBack(ctx context.Context, c *Claim, reason string) (unrunnable time.Duration, err error) {
	err = sqldb.InTx(ctx, s.db, s.log, "hand chunk back", func(tx *sql.Tx) error {
		var epoch uint64
		var status string
		err := tx.QueryRowContext(ctx, "SELECT epoch, status FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ? FOR UPDATE",
			c.BroadcastID, c.Seq).Scan(&epoch, &status)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("chunk row gone: %w", ErrLost)
		case err != nil:
			return fmt.Errorf("lock chunk: %w", err)
		case epoch != c.Epoch || status != StatusLeased:
			return ErrLost
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'pending', lease_owner = NULL, lease_until = NULL, claim_token = NULL,
				refused_at = COALESCE(refused_at, UTC_TIMESTAMP(6)), refusal = ? WHERE broadcast_id = ? AND seq = ?`,
			sqldb.ClampBytes(reason, maxRefusalBytes), c.BroadcastID, c.Seq); err != nil {
			return fmt.Errorf("hand back: %w", err)
		}
		var us int64
		err = tx.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, refused_at, UTC_TIMESTAMP(6)) FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ?",
			c.BroadcastID, c.Seq).Scan(&us)
		unrunnable = time.Duration(us) * time.Microsecond
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	return unrunnable, nil
}
