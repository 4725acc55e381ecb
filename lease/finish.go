package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
	"pushfan/lease/codec"
	"pushfan/lease/outcome"
	"pushfan/model"
	"pushfan/repository"
)

// Stop cancels broadcast id (errMsg empty) or fails it with errMsg (the
// first reason wins), in one transaction:
//
//   - a scheduled or held broadcast ends at once (it has no chunks yet);
//   - otherwise the broadcast is flagged, which every running chunk sees at
//     its next checkpoint, its plan is closed if it is still being planned
//     (the planner's next step is fenced off), and every chunk nobody runs
//     (planning, waiting, pending, or leased with an expired lease) is
//     closed, its epoch moved on so a stalled holder cannot store into it
//     any more, and its targets that got no outcome counted canceled: the
//     plan counted every chunk, so nothing is read from the audience. A
//     leased chunk closed so is recorded in late_holders: its stalled
//     holder's next checkpoints still store what it sent, moved out of
//     canceled (see lateCheckpoint).
//
// Stopping a broadcast that is already canceled is not an error (a retry
// after a lost commit answer); stopping one that ended otherwise is
// ErrFinished, and an unknown id ErrNotFound. It reports whether the
// broadcast is now final.
func (s *Store) Stop(ctx context.Context, id uint64, errMsg string) (bool, error) {
	return s.stop(ctx, id, errMsg, "")
}

// Cancel is Stop's cancel asked by a caller: by is kept as canceled_by (the
// first asker's), and the request's audit entry commits with it.
func (s *Store) Cancel(ctx context.Context, id uint64, by string) (bool, error) {
	return s.stop(ctx, id, "", by)
}

func (s *Store) stop(ctx context.Context, id uint64, errMsg, by string) (final bool, err error) {
	canceled := func(tx *sql.Tx) error { // a caller's cancel (by set) that changed the row
		if by == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET canceled_by = COALESCE(canceled_by, ?) WHERE id = ?",
			sqldb.ClampRunes(by, repository.MaxCreatedByRunes), id); err != nil {
			return fmt.Errorf("record canceled_by: %w", err)
		}
		return audit.Write(ctx, tx)
	}
	err = s.inTx(ctx, "stop broadcast", func(tx *sql.Tx) error {
		final = false
		// One instant for every statement below: a lease that expires
		// between the count and the close would otherwise be closed without
		// its targets counted.
		var now time.Time
		if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
			return fmt.Errorf("read the database clock: %w", err)
		}
		// Chunk rows first, then the late holders, then the broadcast row:
		// the order every transaction here takes its locks in, so none
		// deadlocks another.
		const idle = ` WHERE broadcast_id = ?
			AND (status IN ('planning', 'waiting', 'pending') OR (status = 'leased' AND lease_until < ?))`
		var closed, rest, waiting int64
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(GREATEST(COALESCE(targets, 0) - CAST(committed AS SIGNED), 0)), 0),
				COALESCE(SUM(IF(status = 'waiting', COALESCE(targets, 0), 0)), 0)
			FROM broadcast_chunks FORCE INDEX (idx_chunks_broadcast_status)`+idle+` FOR UPDATE`, id, now).Scan(&closed, &rest, &waiting); err != nil {
			return fmt.Errorf("count idle chunks: %w", err)
		}
		var fenced moved
		var fencedOut int64 // of fenced, those counted canceled by this close
		if closed > 0 {
			// A chunk a takeover changed hands: its fenced holders' sends
			// count target by target (fenced.go).
			var err error
			if fenced, fencedOut, err = closeFencedIdle(ctx, tx, id, now); err != nil {
				return err
			}
			// A leased chunk closed here has a holder that may be alive
			// (paused, or cut off from the database, past its lease) and
			// may have sent targets this close counts canceled: it may
			// still report them (see Checkpoint, "late holder").
			if _, err := tx.ExecContext(ctx, `INSERT INTO late_holders (broadcast_id, seq, epoch, ckpt_seq, rest, closed_at)
				SELECT broadcast_id, seq, epoch, ckpt_seq, GREATEST(COALESCE(targets, 0) - CAST(committed AS SIGNED), 0), ?
				FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'leased' AND lease_until < ? AND fenced_epoch IS NULL
				ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), ckpt_seq = VALUES(ckpt_seq), rest = VALUES(rest), closed_at = VALUES(closed_at)`,
				now, id, now); err != nil {
				return fmt.Errorf("record late holders: %w", err)
			}
			if err := outcome.KeepIdleRests(ctx, tx, id, idle, now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'done', done_by = 'canceled', epoch = epoch + 1,
					committed = GREATEST(CAST(COALESCE(targets, 0) AS SIGNED), CAST(committed AS SIGNED)), cursor_id = hi_id, done_ranges = NULL,
					target_ids = NULL, lease_owner = NULL, lease_until = NULL, claim_token = NULL`+idle, id, now); err != nil {
				return fmt.Errorf("close chunks: %w", err)
			}
		}
		var reason any
		if errMsg != "" {
			reason = sqldb.ClampBytes(errMsg, sqldb.MaxTextBytes)
		}
		end := model.StatusCanceled
		if reason != nil {
			end = model.StatusFailed
		}
		if n, err := endUnstarted(ctx, tx, end, reason, []uint64{id}, model.StatusScheduled, model.StatusHeld); err != nil {
			return fmt.Errorf("end scheduled: %w", err)
		} else if n == 1 {
			final = true
			if err := canceled(tx); err != nil {
				return err
			}
			return s.event(ctx, tx, EventFinished, id) // a scheduled or held one, ended before it started
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET cancel_requested = 1, error = COALESCE(error, ?),
				canceled = canceled + ?, open_chunks = GREATEST(CAST(open_chunks AS SIGNED) - ?, 0), waiting = GREATEST(CAST(waiting AS SIGNED) - ?, 0),
				plan_epoch = plan_epoch + planning, plan_owner = NULL, plan_until = NULL, planning = 0
			WHERE id = ? AND status IN ('planning', 'queued', 'running')`, reason, rest, closed, waiting, id); err != nil {
			return fmt.Errorf("flag: %w", err)
		}
		if err := applyMoved(ctx, tx, id, fenced, fencedOut); err != nil {
			return err
		}
		var status string
		var requested bool
		err = tx.QueryRowContext(ctx, "SELECT status, cancel_requested FROM broadcasts WHERE id = ?", id).Scan(&status, &requested)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		case err != nil:
			return fmt.Errorf("read broadcast: %w", err)
		case status == "canceled" && requested && errMsg == "":
			final = true // already canceled: a replay, or a second admin
		case status == "completed" || status == "canceled" || status == "failed":
			return fmt.Errorf("broadcast %d is %s: %w", id, status, ErrFinished)
		default:
			return canceled(tx)
		}
		return nil
	})
	return final, err
}

// closeFencedIdle records, for Stop, the chunks of broadcast id it closes
// (idle at now, locked) that a takeover changed hands: what their fenced
// holders stored aside moves out of canceled, and the targets the close
// counts canceled are kept for the holders that report later, the one at
// the close among them (fenced.go). It returns what moves, and how many
// of those this close counted canceled (chunk by chunk: a chunk whose
// audience grew since the plan counted fewer than it had).
func closeFencedIdle(ctx context.Context, tx *sql.Tx, id uint64, now time.Time) (moved, int64, error) {
	type chunk struct {
		seq                  int
		epoch, ckpt, cur, hi uint64
		done                 []byte
		rest                 int64
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, epoch, ckpt_seq, cursor_id, hi_id, done_ranges, GREATEST(COALESCE(targets, 0) - CAST(committed AS SIGNED), 0)
		FROM broadcast_chunks WHERE broadcast_id = ? AND fenced_epoch IS NOT NULL
			AND (status IN ('planning', 'waiting', 'pending') OR (status = 'leased' AND lease_until < ?))`, id, now)
	if err != nil {
		return moved{}, 0, fmt.Errorf("chunks taken over: %w", err)
	}
	var cs []chunk
	for rows.Next() {
		var c chunk
		if err := rows.Scan(&c.seq, &c.epoch, &c.ckpt, &c.cur, &c.hi, &c.done, &c.rest); err != nil {
			rows.Close()
			return moved{}, 0, fmt.Errorf("chunks taken over: %w", err)
		}
		cs = append(cs, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return moved{}, 0, fmt.Errorf("chunks taken over: %w", err)
	}
	var all moved
	var out int64
	for _, c := range cs {
		done, err := codec.DecodeRanges(c.cur, c.done)
		if err != nil {
			return moved{}, 0, fmt.Errorf("chunk %d/%d: %w", id, c.seq, err)
		}
		m, err := closeUnsent(ctx, tx, Key{BroadcastID: id, Seq: c.seq}, c.epoch, c.ckpt, unsentAtClose(c.cur, c.hi, done, nil), c.rest, now)
		if err != nil {
			return moved{}, 0, err
		}
		all.add(m)
		out += min(m.total(), c.rest)
	}
	return all, out, nil
}

// endUnstarted ends the broadcasts ids that are in one of the statuses
// from, which have no chunks yet (scheduled, held), as status end with
// reason (nil: none) as their error. Their counted audience becomes
// canceled (canceled = targeted first: SET runs left to right), so the
// counts add up as for any ended broadcast. It returns how many it ended.
func endUnstarted(ctx context.Context, tx *sql.Tx, end model.Status, reason any, ids []uint64, from ...model.Status) (int64, error) {
	in, args := idArgs(ids)
	statuses := make([]any, len(from))
	for i, st := range from {
		statuses[i] = string(st)
	}
	res, err := tx.ExecContext(ctx, `UPDATE broadcasts SET canceled = targeted, status = ?, error = COALESCE(error, ?),
			cancel_requested = 1, finished_at = UTC_TIMESTAMP(6)
		WHERE status IN (`+sqldb.InList(len(from))+`) AND id IN (`+in+`)`,
		append(append([]any{string(end), reason}, statuses...), args...)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Unfinished returns up to limit broadcasts that are queued or running,
// fully planned, with no chunk left open: their last chunk ended but Finish
// did not commit (an instance died in between, or the database was away
// too long). Any instance finishes them. It reads the open broadcasts'
// rows only, never a chunk row.
func (s *Store) Unfinished(ctx context.Context, limit int) ([]uint64, error) {
	ids, err := queryIDs(ctx, s.db, `SELECT id FROM broadcasts WHERE status IN ('planning', 'queued', 'running')
		AND planning = 0 AND open_chunks = 0 ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("unfinished broadcasts: %w", err)
	}
	return ids, nil
}

// Summary is what is kept of a finished broadcast's chunk rows.
type Summary struct {
	Chunks    int            `json:"chunks"`
	Claims    int            `json:"claims"`
	Takeovers int            `json:"takeovers"`
	DoneBy    map[string]int `json:"done_by"` // chunks per instance; "canceled" for closed ones
}

// Finish ends broadcast id once every chunk is done: completed, or
// canceled if a cancel was requested, or failed if an error was stored.
// targeted becomes the exact number of targets that got an outcome, and
// the chunk rows are folded into the broadcast's chunk summary and deleted,
// so the claim queries never wade through finished work. It reports
// whether this call finished the broadcast; a retry after a lost commit
// answer still reports true (the attempt's token is on the row).
func (s *Store) Finish(ctx context.Context, id uint64) (bool, error) {
	// Cheap, lock-free check first: most calls come from a chunk ending
	// while others still run. The broadcast row counts its open chunks, so
	// this reads one row however many chunks there are. "Planned with
	// every chunk done" never becomes false again, so a stale "open" here
	// is followed by another chunk's call.
	var open bool
	if err := s.db.QueryRowContext(ctx, "SELECT planning = 1 OR open_chunks > 0 FROM broadcasts WHERE id = ?", id).Scan(&open); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		}
		return false, fmt.Errorf("finish broadcast %d: %w", id, err)
	}
	if open {
		return false, nil
	}
	finished, _, err := s.finish(ctx, id, false)
	return finished, err
}

// finish is Finish's transaction. With repair, it finishes a broadcast
// whose open_chunks counter is above 0 although every chunk row is done
// (Repair), and reports the counter it found; without, it leaves a
// broadcast the counter keeps open alone.
func (s *Store) finish(ctx context.Context, id uint64, repair bool) (finished bool, counted int64, err error) {
	token := NewToken()
	err = s.inTx(ctx, "finish broadcast", func(tx *sql.Tx) error {
		finished, counted = false, 0
		sum := Summary{DoneBy: map[string]int{}}
		rows, err := tx.QueryContext(ctx, "SELECT status, claims, takeovers, COALESCE(done_by, '') FROM broadcast_chunks WHERE broadcast_id = ? FOR UPDATE", id)
		if err != nil {
			return fmt.Errorf("lock chunks: %w", err)
		}
		for rows.Next() {
			var status, by string
			var claims, takeovers int
			if err := rows.Scan(&status, &claims, &takeovers, &by); err != nil {
				rows.Close()
				return fmt.Errorf("scan chunk: %w", err)
			}
			if status != StatusDone {
				rows.Close()
				return nil // the counters say otherwise; leave it to the chunk that ends it
			}
			sum.Chunks++
			sum.Claims += claims
			sum.Takeovers += takeovers
			sum.DoneBy[by]++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock chunks: %w", err)
		}
		var status string
		var cancel, planning bool
		var errText, had sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT status, cancel_requested, error, finish_token, planning = 1, open_chunks FROM broadcasts WHERE id = ? FOR UPDATE", id).
			Scan(&status, &cancel, &errText, &had, &planning, &counted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		case err != nil:
			return fmt.Errorf("lock broadcast: %w", err)
		case planning, counted > 0 && !repair, counted == 0 && repair:
			return nil // open; or, for a repair, nothing to repair (Finish's)
		case status == "completed" || status == "canceled" || status == "failed" || status == "scheduled" || status == "held":
			return nil // held and scheduled ones have no chunks yet: nothing to finish
		}
		final := "completed"
		switch {
		case errText.Valid:
			final = "failed"
		case cancel:
			final = "canceled"
		}
		summary, err := json.Marshal(sum)
		if err != nil {
			return fmt.Errorf("encode chunk summary: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = ?, targeted = succeeded + failed + canceled + capped, open_chunks = 0,
			started_at = COALESCE(started_at, UTC_TIMESTAMP(6)), finished_at = UTC_TIMESTAMP(6), finish_token = ?, chunk_summary = ? WHERE id = ?`,
			final, token, string(summary), id); err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM broadcast_chunks WHERE broadcast_id = ?", id); err != nil {
			return fmt.Errorf("compact chunks: %w", err)
		}
		// Sends stored aside by holders a takeover fenced off, of chunks
		// that completed: their successors sent those targets again. Looked
		// for with a plain read first, so that the common broadcast, with
		// none, takes no range lock on the table.
		var aside int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM fenced_sends WHERE broadcast_id = ?", id).Scan(&aside); err != nil {
			return fmt.Errorf("look for fenced sends: %w", err)
		}
		if aside > 0 {
			if _, err := tx.ExecContext(ctx, "DELETE FROM fenced_sends WHERE broadcast_id = ?", id); err != nil {
				return fmt.Errorf("drop fenced sends: %w", err)
			}
		}
		if err := s.event(ctx, tx, EventFinished, id); err != nil {
			return err
		}
		finished = true
		return nil
	})
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrOutdated) {
		var had sql.NullString
		if e := s.db.QueryRowContext(ctx, "SELECT finish_token FROM broadcasts WHERE id = ?", id).Scan(&had); e == nil && had.String == token {
			return true, counted, nil // the commit happened; its answer was lost
		}
	}
	return finished, counted, err
}

// Row is a chunk as stored, for operators and tests.
type Row struct {
	Seq        int
	Lo, Hi     uint64
	Cursor     uint64
	Done       []Range
	Status     string
	LeaseOwner string
	Epoch      uint64
	Claims     int
	Takeovers  int
	Committed  int64
	Targets    int64 // -1 while unknown
	DoneBy     string
	Refusal    string
}

// Chunks returns a broadcast's chunk rows in order; none once it finished
// (see Finish; the broadcast keeps their Summary).
func (s *Store) Chunks(ctx context.Context, id uint64) ([]Row, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, lo_id, hi_id, cursor_id, done_ranges, status, COALESCE(lease_owner, ''), epoch,
			claims, takeovers, committed, COALESCE(targets, -1), COALESCE(done_by, ''), COALESCE(refusal, '')
		FROM broadcast_chunks WHERE broadcast_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("chunks of %d: %w", id, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var done []byte
		if err := rows.Scan(&r.Seq, &r.Lo, &r.Hi, &r.Cursor, &done, &r.Status, &r.LeaseOwner, &r.Epoch,
			&r.Claims, &r.Takeovers, &r.Committed, &r.Targets, &r.DoneBy, &r.Refusal); err != nil {
			return nil, fmt.Errorf("chunks of %d: %w", id, err)
		}
		if r.Done, err = codec.DecodeRanges(r.Cursor, done); err != nil {
			return nil, fmt.Errorf("chunk %d/%d: %w", id, r.Seq, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
