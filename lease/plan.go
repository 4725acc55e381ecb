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
)

// Step is one stored piece of a broadcast's plan: the audience read up to
// Cursor, and the chunks its targets went to. A plan is stored in steps so
// that the submit answers at once whatever the audience's size, sending
// starts with the first chunks while the rest is planned, and a plan
// survives the crash of the instance running it.
type Step struct {
	// Cursor: every target of the audience up to it is in a chunk (Chunks
	// or Building, of this step or an earlier one).
	Cursor uint64
	// Seq is the next chunk number after this step.
	Seq int
	// Chunks are complete: pending, or waiting until their NotBefore.
	Chunks []Plan
	// Building are chunks still being filled (a due instant's targets
	// arrive spread over the whole audience): stored so that a takeover
	// resumes them, never claimed.
	Building []Plan
	// Added is how many targets this step assigned (to targeted).
	Added int64
	// Deferred and ZoneFallbacks count this step's targets moved to a
	// quiet window's end, and those whose zone was unknown.
	Deferred, ZoneFallbacks int64
	// Excluded counts this step's targets left out for want of consent to
	// the broadcast's category, NightDeferred those moved to the end of its
	// night window (docs/consent.md).
	Excluded, NightDeferred int64
	Kept                    []TargetOutcome // the excluded and deferred, kept one by one (outcome.PlanSeq)
	// Done: the audience is exhausted and every chunk is in Chunks.
	Done bool
	// UsersTargeted, on the Done step, is the users the plan's targets
	// belong to when their count (package plan) came in time; else nil and
	// SetUsersTargeted stores it later.
	UsersTargeted *int64
	// MaxCursor and Width are fixed by the first step: the audience's
	// snapshot (no target above it) and the targets per chunk.
	MaxCursor, Width uint64
}

// PlanClaim is a broadcast whose plan this instance holds, as stored.
type PlanClaim struct {
	BroadcastID uint64
	Epoch       uint64 // fencing token of this claim of the plan
	Cursor      uint64
	Seq         int
	MaxCursor   uint64 // 0 until the first step fixes it
	Width       uint64 // 0 until the first step fixes it
	Failures    int    // earlier attempts that failed
	Class       Class
	Building    []Plan // the chunks an earlier holder was filling
	// Targeted and Attempted are the broadcast's planned targets and
	// those with an outcome, as the last step read them: how far the plan
	// runs ahead of the sends.
	Targeted, Attempted int64
}

// ClaimPlan leases the plan of one broadcast that needs planning and
// nobody plans (new, or its planner died or gave it up) to owner. skip are
// broadcasts not to take (this instance plans them already, or cannot).
// It returns nil when there is none. SKIP LOCKED lets instances claim at
// once without waiting on each other.
func (s *Store) ClaimPlan(ctx context.Context, owner string, lease time.Duration, skip []uint64) (*PlanClaim, error) {
	var pc *PlanClaim
	err := s.inTx(ctx, "claim plan", func(tx *sql.Tx) error {
		pc = nil
		var not string
		args := make([]any, 0, len(skip))
		if len(skip) > 0 {
			not = " AND id NOT IN (" + sqldb.InList(len(skip)) + ")"
			for _, id := range skip {
				args = append(args, id)
			}
		}
		c := &PlanClaim{}
		var class string
		var paced bool
		err := tx.QueryRowContext(ctx, `SELECT id, plan_epoch, plan_cursor, plan_seq, max_token_id, plan_width, plan_failures,
				class, COALESCE(max_rate, 0) > 0 OR COALESCE(deliver_over_ms, 0) > 0
			FROM broadcasts FORCE INDEX (idx_broadcasts_planning)
			WHERE planning = 1 AND (plan_until IS NULL OR plan_until < UTC_TIMESTAMP(6))`+not+`
			ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, args...).
			Scan(&c.BroadcastID, &c.Epoch, &c.Cursor, &c.Seq, &c.MaxCursor, &c.Width, &c.Failures, &class, &paced)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("select: %w", err)
		}
		c.Class = ClassOf(class, paced)
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET plan_epoch = plan_epoch + 1, plan_owner = ?,
				plan_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = ?`, owner, lease.Microseconds(), c.BroadcastID); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		c.Epoch++
		if c.Building, err = building(ctx, tx, c.BroadcastID); err != nil {
			return err
		}
		pc = c
		return nil
	})
	return pc, err
}

// building reads the chunks a plan is filling.
func building(ctx context.Context, tx *sql.Tx, id uint64) ([]Plan, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, lo_id, hi_id, COALESCE(targets, 0), not_before, target_ids
		FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'planning' ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("building chunks of %d: %w", id, err)
	}
	defer rows.Close()
	var out []Plan
	for rows.Next() {
		var p Plan
		var nb sql.NullTime
		var raw []byte
		if err := rows.Scan(&p.Seq, &p.Lo, &p.Hi, &p.Targets, &nb, &raw); err != nil {
			return nil, fmt.Errorf("building chunks of %d: %w", id, err)
		}
		if nb.Valid {
			t := nb.Time.UTC()
			p.NotBefore = &t
		}
		if p.IDs, err = codec.DecodeIDs(p.Lo, raw); err != nil {
			return nil, fmt.Errorf("chunk %d/%d: %w", id, p.Seq, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("building chunks of %d: %w", id, err)
	}
	return out, nil
}

// CommitStep stores st for the plan pc holds, in one transaction fenced by
// pc's epoch and conditional on the cursor pc read from, and renews the
// plan's lease; on success pc moves to the step's cursor and seq. A retry
// after an unknown outcome (any error but ErrLost) of the same step is
// recognised: the row already holds its cursor, and nothing is added
// twice. ErrLost: the plan is not pc's any more (a cancel, or a takeover
// after this instance stalled past its lease); nothing was stored.
func (s *Store) CommitStep(ctx context.Context, pc *PlanClaim, st Step, lease time.Duration) error {
	if !st.Done && st.Cursor <= pc.Cursor {
		return fmt.Errorf("plan of %d: step to cursor %d does not advance from %d", pc.BroadcastID, st.Cursor, pc.Cursor)
	} else if s.keepNone {
		st.Kept = nil
	}
	err := s.inTx(ctx, "store plan step", func(tx *sql.Tx) error {
		// Chunk rows first, then the broadcast row, as everywhere here.
		if _, err := tx.ExecContext(ctx, "SELECT seq FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'planning' FOR UPDATE", pc.BroadcastID); err != nil {
			return fmt.Errorf("lock building chunks: %w", err)
		}
		var epoch, cursor uint64
		var seq int
		var planning bool
		err := tx.QueryRowContext(ctx, `SELECT plan_epoch, plan_cursor, plan_seq, planning, targeted, succeeded + failed + canceled + capped
			FROM broadcasts WHERE id = ? FOR UPDATE`, pc.BroadcastID).
			Scan(&epoch, &cursor, &seq, &planning, &pc.Targeted, &pc.Attempted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("broadcast gone: %w", ErrLost)
		case err != nil:
			return fmt.Errorf("lock broadcast: %w", err)
		case epoch != pc.Epoch:
			return fmt.Errorf("plan claimed at epoch %d, now at %d: %w", pc.Epoch, epoch, ErrLost)
		case cursor == st.Cursor && seq == st.Seq && (planning != st.Done || cursor != pc.Cursor):
			return nil // the step's earlier attempt committed; its answer was lost
		case !planning:
			return fmt.Errorf("the plan was closed (canceled): %w", ErrLost)
		case cursor != pc.Cursor || seq != pc.Seq:
			return fmt.Errorf("plan read at cursor %d/seq %d, stored %d/%d: %w", pc.Cursor, pc.Seq, cursor, seq, ErrLost)
		}
		set := "plan_cursor = ?, plan_seq = ?, plan_refused_at = NULL, plan_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND"
		args := []any{st.Cursor, st.Seq, lease.Microseconds()}
		if st.MaxCursor > 0 {
			set += ", max_token_id = ?, plan_width = ?"
			args = append(args, st.MaxCursor, st.Width)
		}
		return writeStep(ctx, tx, pc.BroadcastID, pc.Class, pc.Seq, st, set, args...)
	})
	if err != nil {
		if errors.Is(err, ErrLost) {
			return fmt.Errorf("plan of %d: %w", pc.BroadcastID, err)
		}
		return err
	}
	pc.Cursor, pc.Seq = st.Cursor, st.Seq
	pc.Targeted += st.Added
	if st.MaxCursor > 0 {
		pc.MaxCursor, pc.Width = st.MaxCursor, st.Width
	}
	return nil
}

// writeStep stores st's chunks (new ones and completed building ones) and
// adds their counts to the broadcast, whose row the caller has locked or
// just inserted; set and args are the caller's own assignments to it.
// prevSeq is the chunk number the step started from: the chunks numbered
// from there are new rows, open until done.
func writeStep(ctx context.Context, tx *sql.Tx, id uint64, class Class, prevSeq int, st Step, set string, args ...any) error {
	var now time.Time
	if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
		return fmt.Errorf("plan step: database clock: %w", err)
	}
	var vstart uint64
	if len(st.Chunks) > 0 {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MIN(vseq), 0) FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
			WHERE status = 'pending' AND class_rank = ?`, class).Scan(&vstart); err != nil {
			return fmt.Errorf("plan step: queue position: %w", err)
		}
	}
	var waiting int64
	rows := make([]chunkRow, 0, len(st.Chunks)+len(st.Building))
	for i, p := range st.Chunks {
		status := StatusPending
		if p.NotBefore != nil && p.NotBefore.After(now) {
			status = StatusWaiting
			waiting += p.Targets
		}
		rows = append(rows, chunkRow{Plan: p, status: status, vseq: vstart + uint64(i)})
	}
	for _, p := range st.Building {
		rows = append(rows, chunkRow{Plan: p, status: StatusPlanning})
	}
	if err := upsertChunks(ctx, tx, id, class, rows); err != nil {
		return err
	}
	if err := outcome.Keep(ctx, tx, outcome.Holder{BroadcastID: id, Seq: outcome.PlanSeq, CkptSeq: st.Cursor}, st.Kept); err != nil {
		return err
	}
	counts := "targeted = targeted + ?, open_chunks = open_chunks + ?, waiting = waiting + ?, deferred = deferred + ?, zone_fallbacks = zone_fallbacks + ?, " +
		"excluded_no_consent = excluded_no_consent + ?, night_deferred = night_deferred + ?"
	cargs := []any{st.Added, st.Seq - prevSeq, waiting, st.Deferred, st.ZoneFallbacks, st.Excluded, st.NightDeferred}
	if st.Done {
		counts += `, planning = 0, planned_at = UTC_TIMESTAMP(6), plan_owner = NULL, plan_until = NULL,
			status = IF(status = 'planning', 'queued', status), users_targeted = COALESCE(users_targeted, ?)`
		cargs = append(cargs, st.UsersTargeted)
	}
	if set != "" {
		counts += ", " + set
		cargs = append(cargs, args...)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET "+counts+" WHERE id = ?", append(cargs, id)...); err != nil {
		return fmt.Errorf("plan step: broadcast counts: %w", err)
	}
	return nil
}

// chunkRow is a Plan with the state it is stored in.
type chunkRow struct {
	Plan
	status string
	vseq   uint64
}

// upsertRows bounds one multi-row statement: a row with its target list
// is up to 20 KB or so, and max_allowed_packet is 16 MB by default.
const upsertRows = 100

// upsertChunks inserts chunk rows, or replaces the building rows of the
// same numbers (a chunk being filled grows until it is complete).
func upsertChunks(ctx context.Context, tx *sql.Tx, id uint64, class Class, rows []chunkRow) error {
	const cols = 12
	if len(rows) == 0 {
		return nil
	}
	// A chunk carries its broadcast's app: instances claim each app's
	// chunks in slots of their own (ClaimOptions.App).
	var app string
	if err := tx.QueryRowContext(ctx, "SELECT app FROM broadcasts WHERE id = ?", id).Scan(&app); err != nil {
		return fmt.Errorf("chunks of %d: read its app: %w", id, err)
	}
	for start := 0; start < len(rows); start += upsertRows {
		batch := rows[start:min(start+upsertRows, len(rows))]
		args := make([]any, 0, cols*len(batch))
		for _, r := range batch {
			if r.Hi <= r.Lo || r.Targets < 0 {
				return fmt.Errorf("chunk %d/%d is empty: (%d, %d], %d targets", id, r.Seq, r.Lo, r.Hi, r.Targets)
			}
			list, err := codec.EncodeIDs(r.Lo, r.IDs)
			if err != nil {
				return fmt.Errorf("chunk %d/%d: %w", id, r.Seq, err)
			}
			var notBefore any
			if r.NotBefore != nil {
				notBefore = r.NotBefore.UTC()
			}
			args = append(args, id, r.Seq, r.Lo, r.Hi, r.Lo, r.Targets, class, r.vseq, notBefore, r.status, list, app)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO broadcast_chunks
				(broadcast_id, seq, lo_id, hi_id, cursor_id, targets, class_rank, vseq, not_before, status, target_ids, app) VALUES `+
			sqldb.Placeholders(len(batch), cols)+`
			ON DUPLICATE KEY UPDATE lo_id = VALUES(lo_id), hi_id = VALUES(hi_id), cursor_id = VALUES(cursor_id), targets = VALUES(targets),
				vseq = VALUES(vseq), not_before = VALUES(not_before), status = VALUES(status), target_ids = VALUES(target_ids)`, args...); err != nil {
			return fmt.Errorf("store chunks: %w", err)
		}
	}
	return nil
}

// ReleasePlan gives the plan pc holds up, so another attempt (here or on
// any instance) resumes it from its stored cursor: at once (retryIn 0, a
// shutdown) or after retryIn. failed counts a failed attempt; it returns
// how many attempts have failed. ErrLost when the plan is not pc's.
func (s *Store) ReleasePlan(ctx context.Context, pc *PlanClaim, retryIn time.Duration, failed bool) (int, error) {
	var failures int
	err := sqldb.InTx(ctx, s.db, s.log, "release plan", func(tx *sql.Tx) error {
		// A release older than the schema fails its plan steps
		// (ErrOutdated): that is a hand-back, not a failed attempt, and the
		// newer release resumes the plan at once (schema.go).
		old, err := s.behind(ctx, tx)
		if err != nil {
			return err
		}
		retryIn := retryIn
		add := 0
		switch {
		case old:
			retryIn = 0
		case failed:
			add = 1
		}
		res, err := tx.ExecContext(ctx, `UPDATE broadcasts SET plan_owner = NULL, plan_failures = plan_failures + ?,
				plan_until = IF(? = 0, NULL, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
			WHERE id = ? AND planning = 1 AND plan_epoch = ?`, add, retryIn.Microseconds(), retryIn.Microseconds(), pc.BroadcastID, pc.Epoch)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLost
		}
		return tx.QueryRowContext(ctx, "SELECT plan_failures FROM broadcasts WHERE id = ?", pc.BroadcastID).Scan(&failures)
	})
	if err != nil {
		return 0, fmt.Errorf("plan of %d: %w", pc.BroadcastID, err)
	}
	return failures, nil
}

// RefusePlan hands back a plan this instance cannot run (its configuration
// lacks the broadcast's named audience, in the middle of a rolling deploy),
// to be retried after retryIn, and reports for how long no instance has
// been able to (by the database's clock); a stored step clears that time.
func (s *Store) RefusePlan(ctx context.Context, pc *PlanClaim, retryIn time.Duration) (time.Duration, error) {
	var us sql.NullInt64
	err := sqldb.InTx(ctx, s.db, s.log, "refuse plan", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE broadcasts SET plan_owner = NULL, plan_refused_at = COALESCE(plan_refused_at, UTC_TIMESTAMP(6)),
				plan_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
			WHERE id = ? AND planning = 1 AND plan_epoch = ?`, retryIn.Microseconds(), pc.BroadcastID, pc.Epoch)
		if err != nil {
			return fmt.Errorf("refuse: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLost
		}
		return tx.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, plan_refused_at, UTC_TIMESTAMP(6)) FROM broadcasts WHERE id = ?", pc.BroadcastID).Scan(&us)
	})
	if err != nil {
		return 0, fmt.Errorf("plan of %d: %w", pc.BroadcastID, err)
	}
	return time.Duration(us.Int64) * time.Microsecond, nil
}

// PromoteWaiting makes up to limit waiting chunks whose instant has come
// (by the database's clock) pending, queued from the place their class's
// queue has reached, and returns how many. Only this reads waiting rows,
// by their own index: the claim never does, however many wait.
func (s *Store) PromoteWaiting(ctx context.Context, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, "promote waiting chunks", func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `SELECT broadcast_id, seq, class_rank, COALESCE(targets, 0) FROM broadcast_chunks FORCE INDEX (idx_chunks_waiting)
			WHERE status = 'waiting' AND not_before <= UTC_TIMESTAMP(6) ORDER BY not_before LIMIT ? FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return fmt.Errorf("select due: %w", err)
		}
		type due struct {
			key     Key
			class   Class
			targets int64
		}
		var ds []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.key.BroadcastID, &d.key.Seq, &d.class, &d.targets); err != nil {
				rows.Close()
				return fmt.Errorf("select due: %w", err)
			}
			ds = append(ds, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("select due: %w", err)
		}
		if len(ds) == 0 {
			return nil
		}
		vstart := map[Class]uint64{}
		byBroadcast := map[uint64]int64{}
		for _, d := range ds {
			v, ok := vstart[d.class]
			if !ok {
				if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MIN(vseq), 0) FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
					WHERE status = 'pending' AND class_rank = ?`, d.class).Scan(&v); err != nil {
					return fmt.Errorf("queue position: %w", err)
				}
			}
			if _, err := tx.ExecContext(ctx, "UPDATE broadcast_chunks SET status = 'pending', vseq = ? WHERE broadcast_id = ? AND seq = ? AND status = 'waiting'",
				v, d.key.BroadcastID, d.key.Seq); err != nil {
				return fmt.Errorf("promote chunk %d/%d: %w", d.key.BroadcastID, d.key.Seq, err)
			}
			vstart[d.class] = v + 1
			byBroadcast[d.key.BroadcastID] += d.targets
		}
		for _, id := range slices.Sorted(maps.Keys(byBroadcast)) { // one lock order for every promoter
			t := byBroadcast[id]
			if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET waiting = GREATEST(CAST(waiting AS SIGNED) - ?, 0) WHERE id = ?", t, id); err != nil {
				return fmt.Errorf("waiting of %d: %w", id, err)
			}
		}
		n = len(ds)
		return nil
	})
	return n, err
}

// SetUsersTargeted stores a planned broadcast's count of users, counted
// after its plan's last step was stored. The first count stored stays:
// a later one counts the same tokens, but for those dead since by others.
func (s *Store) SetUsersTargeted(ctx context.Context, id uint64, n int64) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE broadcasts SET users_targeted = ? WHERE id = ? AND users_targeted IS NULL AND planning = 0", n, id); err != nil {
		return fmt.Errorf("broadcast %d: set users targeted: %w", id, err)
	}
	return nil
}
