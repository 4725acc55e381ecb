package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"pushfan/internal/sqldb"
)

// maxErrorBytes is broadcasts.error's width (TEXT).
const maxErrorBytes = 65535

// Stop cancels broadcast id (errMsg empty) or fails it with errMsg (the
// first reason wins), in one transaction:
//
//   - a scheduled or held broadcast ends at once (it has no chunks yet);
//   - otherwise the broadcast is flagged, which every running chunk sees at
//     its next checkpoint, and every chunk nobody runs (pending, or leased
//     with an expired lease) is closed in one statement, its epoch moved on
//     so a stalled holder cannot store into it any more. Settle counts the
//     closed chunks' targets as canceled.
//
// Stopping a broadcast that is already canceled is not an error (a retry
// after a lost commit answer); stopping one that ended otherwise is
// ErrFinished, and an unknown id ErrNotFound. It reports whether the
// broadcast is now final.
func (s *Store) Stop(ctx context.Context, id uint64, errMsg string) (final bool, err error) {
	err = sqldb.InTx(ctx, s.db, s.log, "stop broadcast", func(tx *sql.Tx) error {
		final = false
		// Chunk rows first, then the broadcast row: the order every
		// transaction here takes its locks in, so none deadlocks another.
		if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'canceled', epoch = epoch + 1,
				lease_owner = NULL, lease_until = NULL, claim_token = NULL
			WHERE broadcast_id = ? AND (status = 'pending' OR (status = 'leased' AND lease_until < UTC_TIMESTAMP(6)))`, id); err != nil {
			return fmt.Errorf("close chunks: %w", err)
		}
		var reason any
		if errMsg != "" {
			reason = clampBytes(errMsg, maxErrorBytes)
		}
		// A held broadcast has no chunks either; its counted audience
		// becomes canceled (canceled = targeted first: SET runs left to
		// right), so the counts add up as for any canceled broadcast.
		res, err := tx.ExecContext(ctx, `UPDATE broadcasts SET canceled = targeted, status = IF(? IS NULL, 'canceled', 'failed'), error = COALESCE(error, ?),
				cancel_requested = 1, finished_at = UTC_TIMESTAMP(6) WHERE id = ? AND status IN ('scheduled', 'held')`, reason, reason, id)
		if err != nil {
			return fmt.Errorf("end scheduled: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			final = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET cancel_requested = 1, error = COALESCE(error, ?)
			WHERE id = ? AND status IN ('queued', 'running')`, reason, id); err != nil {
			return fmt.Errorf("flag: %w", err)
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
		}
		return nil
	})
	return final, err
}

// Closed is a chunk closed by Stop whose targets are not counted yet.
type Closed struct {
	Key
	Epoch          uint64
	Lo, Hi, Cursor uint64
	Done           []Range
	// Targets is the chunk's planned target count, -1 when unknown.
	Targets int64
	Zones   string // the zone group the chunk reads (Plan.Zones)
}

// Untouched reports whether no outcome of the chunk was ever stored: all
// of its planned targets are the ones to count as canceled.
func (c Closed) Untouched() bool { return c.Cursor == c.Lo && len(c.Done) == 0 }

// Counted reports whether Settle counts the chunk by itself: untouched,
// with a known planned count.
func (c Closed) Counted() bool { return c.Untouched() && c.Targets >= 0 }

// ClosedChunks lists broadcast id's chunks that Stop closed and Settle has
// not counted yet.
func (s *Store) ClosedChunks(ctx context.Context, id uint64) ([]Closed, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, epoch, lo_id, hi_id, cursor_id, done_ranges, COALESCE(targets, -1), COALESCE(zones, '')
		FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'canceled' ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("closed chunks of %d: %w", id, err)
	}
	defer rows.Close()
	var out []Closed
	for rows.Next() {
		c := Closed{Key: Key{BroadcastID: id}}
		var done []byte
		if err := rows.Scan(&c.Seq, &c.Epoch, &c.Lo, &c.Hi, &c.Cursor, &done, &c.Targets, &c.Zones); err != nil {
			return nil, fmt.Errorf("closed chunks of %d: %w", id, err)
		}
		if c.Done, err = decodeRanges(c.Cursor, done); err != nil {
			return nil, fmt.Errorf("chunk %d/%d: %w", id, c.Seq, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("closed chunks of %d: %w", id, err)
	}
	return out, nil
}

// Settlement is the count of never-attempted targets of one closed chunk.
type Settlement struct {
	Closed
	Canceled int64
}

// Settle marks closed chunks done and adds their never-attempted targets
// to the broadcast's canceled count, in one transaction: every untouched
// chunk whose planned count is known by that count, in one statement
// (thousands of queued chunks settle at once), and the chunks in ss by
// the count the caller established for each. A chunk settled already (by
// another instance, or by an attempt whose answer was lost) is skipped, so
// a count is never added twice.
func (s *Store) Settle(ctx context.Context, id uint64, ss []Settlement) error {
	sort.Slice(ss, func(i, j int) bool { return ss[i].Seq < ss[j].Seq })
	return sqldb.InTx(ctx, s.db, s.log, "settle closed chunks", func(tx *sql.Tx) error {
		const untouched = " FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'canceled' AND cursor_id = lo_id AND done_ranges IS NULL AND targets IS NOT NULL"
		var canceled int64
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(targets), 0)"+untouched+" FOR UPDATE", id).Scan(&canceled); err != nil {
			return fmt.Errorf("count untouched chunks: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'done', done_by = 'canceled', committed = committed + targets, cursor_id = hi_id
			WHERE broadcast_id = ? AND status = 'canceled' AND cursor_id = lo_id AND done_ranges IS NULL AND targets IS NOT NULL`, id); err != nil {
			return fmt.Errorf("settle untouched chunks: %w", err)
		}
		for _, st := range ss {
			res, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'done', done_by = 'canceled', committed = committed + ?,
					cursor_id = hi_id, done_ranges = NULL
				WHERE broadcast_id = ? AND seq = ? AND status = 'canceled' AND epoch = ?`, st.Canceled, id, st.Seq, st.Epoch)
			if err != nil {
				return fmt.Errorf("settle chunk %d: %w", st.Seq, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				canceled += st.Canceled
			}
		}
		return addCounts(ctx, tx, id, 0, 0, canceled, 0, nil)
	})
}

// Unsettled returns up to limit broadcasts with closed chunks not counted
// yet: a canceling instance that died before Settle leaves them for any
// other to finish.
func (s *Store) Unsettled(ctx context.Context, limit int) ([]uint64, error) {
	return s.ids(ctx, "unsettled broadcasts", `SELECT DISTINCT broadcast_id FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
		WHERE status = 'canceled' ORDER BY broadcast_id LIMIT ?`, limit)
}

// ids runs a query of broadcast ids.
func (s *Store) ids(ctx context.Context, what, q string, args ...any) ([]uint64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ids, nil
}

// Unfinished returns up to limit broadcasts that are queued or running with
// no chunk left open: their last chunk ended but Finish did not commit (an
// instance died in between, or the database was away too long). Any
// instance finishes them.
func (s *Store) Unfinished(ctx context.Context, limit int) ([]uint64, error) {
	return s.ids(ctx, "unfinished broadcasts", `SELECT b.id FROM broadcasts b WHERE b.status IN ('queued', 'running')
		AND NOT EXISTS (SELECT 1 FROM broadcast_chunks c WHERE c.broadcast_id = b.id AND c.status <> 'done') ORDER BY b.id LIMIT ?`, limit)
}

// CannotCount records that this instance cannot count a closed chunk's
// remaining targets (its configuration lacks the audience) and reports for
// how long no instance could (by the database's clock), so that one that
// can gets the chance first.
func (s *Store) CannotCount(ctx context.Context, c Closed, reason string) (time.Duration, error) {
	var us sql.NullInt64
	err := sqldb.InTx(ctx, s.db, s.log, "record an uncountable chunk", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET refused_at = COALESCE(refused_at, UTC_TIMESTAMP(6)), refusal = ?
			WHERE broadcast_id = ? AND seq = ? AND status = 'canceled' AND epoch = ?`, clampReason(reason), c.BroadcastID, c.Seq, c.Epoch); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, refused_at, UTC_TIMESTAMP(6)) FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ?",
			c.BroadcastID, c.Seq).Scan(&us)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // settled meanwhile
	}
	if err != nil {
		return 0, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	return time.Duration(us.Int64) * time.Microsecond, nil
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
	// while others still run. "Every chunk done" never becomes false again,
	// so a stale "open" here is followed by another chunk's call.
	var open bool
	if err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM broadcast_chunks WHERE broadcast_id = ? AND status <> 'done')", id).Scan(&open); err != nil {
		return false, fmt.Errorf("finish broadcast %d: %w", id, err)
	}
	if open {
		return false, nil
	}
	token := NewToken()
	var finished bool
	err := sqldb.InTx(ctx, s.db, s.log, "finish broadcast", func(tx *sql.Tx) error {
		finished = false
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
				return nil // reopened? no: a chunk inserted by a racing promote; not finished
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
		var cancel bool
		var errText, had sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT status, cancel_requested, error, finish_token FROM broadcasts WHERE id = ? FOR UPDATE", id).
			Scan(&status, &cancel, &errText, &had)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
		case err != nil:
			return fmt.Errorf("lock broadcast: %w", err)
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
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = ?, targeted = succeeded + failed + canceled,
			started_at = COALESCE(started_at, UTC_TIMESTAMP(6)), finished_at = UTC_TIMESTAMP(6), finish_token = ?, chunk_summary = ? WHERE id = ?`,
			final, token, string(summary), id); err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM broadcast_chunks WHERE broadcast_id = ?", id); err != nil {
			return fmt.Errorf("compact chunks: %w", err)
		}
		finished = true
		return nil
	})
	if err != nil && ctx.Err() == nil {
		var had sql.NullString
		if e := s.db.QueryRowContext(ctx, "SELECT finish_token FROM broadcasts WHERE id = ?", id).Scan(&had); e == nil && had.String == token {
			return true, nil // the commit happened; its answer was lost
		}
	}
	return finished, err
}

// SetTargets records planned target counts of chunks (counts[seq], for
// chunks not counted yet; nil for none) and the broadcast's live targeted,
// while it has not finished (Finish stores the exact figure).
func (s *Store) SetTargets(ctx context.Context, id uint64, counts []int64, total int64) error {
	return sqldb.InTx(ctx, s.db, s.log, "set chunk targets", func(tx *sql.Tx) error {
		for start := 0; start < len(counts); start += 500 {
			end := min(start+500, len(counts))
			var b strings.Builder
			args := make([]any, 0, 2*(end-start)+3)
			b.WriteString("UPDATE broadcast_chunks SET targets = CASE seq")
			for i := start; i < end; i++ {
				b.WriteString(" WHEN ? THEN ?")
				args = append(args, i, counts[i])
			}
			b.WriteString(" END WHERE broadcast_id = ? AND seq BETWEEN ? AND ? AND targets IS NULL")
			args = append(args, id, start, end-1)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("chunk targets: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET targeted = ? WHERE id = ? AND finished_at IS NULL", total, id); err != nil {
			return fmt.Errorf("live targeted: %w", err)
		}
		return nil
	})
}

// clampBytes cuts s to at most n bytes on a rune boundary.
func clampBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
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
		if r.Done, err = decodeRanges(r.Cursor, done); err != nil {
			return nil, fmt.Errorf("chunk %d/%d: %w", id, r.Seq, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
