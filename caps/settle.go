package caps

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"pushfan/config"
	"pushfan/internal/platform/sqldb"
)

// Settlement is what one checkpoint of broadcast B learned about its
// users: Sent had a device sent, Unsent had one canceled, failed for
// good or dead (a user may be in both).
type Settlement struct {
	B            uint64
	Set          Set
	Sent, Unsent []uint64
	// Zones gives users' zones, for a user sent after its slot was given
	// back (nil, or a user absent from its answer: UTC).
	Zones func(ctx context.Context, ids []uint64) (map[uint64]*time.Location, error)
	Now   time.Time
}

// Settled is what Settle did.
type Settled struct {
	// Released users gave their slots back: none of their devices read
	// so far was sent.
	Released int64
	// Retaken users were sent without holding their slots: released
	// while a device of theirs was in flight in another chunk, or
	// reserved by a chunk whose slots another chunk's release took. They
	// took them again. Over are those who found a cap full (another
	// broadcast took the slot in between): sent past the cap.
	Retaken, Over int64
}

// Settle stores, inside a chunk checkpoint's transaction tx, what became
// of the settlement's users. A user with a device sent is sent, and the
// first time, holds a slot of every cap (taking it again if it was given
// back meanwhile). A user with devices unsent and none sent (in this
// checkpoint or before) is released: its slots are given back with the
// outcomes that free them, and a device of theirs read later reserves
// again. A replayed checkpoint runs none of it again (package lease).
func (l *Ledger) Settle(ctx context.Context, tx *sql.Tx, s Settlement) (Settled, error) {
	var out Settled
	sent, unsent := sortedUnique(s.Sent), sortedUnique(s.Unsent)
	var check []uint64
	for batch := range slices.Chunk(sent, maxUsersPerStatement) {
		states, err := readStates(ctx, tx, s.B, batch, true)
		if err != nil {
			return out, err
		}
		args := make([]any, 0, 3*len(batch))
		for _, id := range batch {
			args = append(args, s.B, id, stateSent)
			if st, ok := states[id]; !ok || st != stateSent {
				check = append(check, id)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO frequency_users (broadcast_id, user_id, state) VALUES `+
			sqldb.Placeholders(len(batch), 3)+` ON DUPLICATE KEY UPDATE state = 3`, args...); err != nil {
			return out, fmt.Errorf("mark capped users sent: %w", err)
		}
	}
	if len(check) > 0 && !s.Set.Empty() {
		var err error
		if out.Retaken, out.Over, err = l.retake(ctx, tx, s, check); err != nil {
			return out, err
		}
	}
	for batch := range slices.Chunk(unsent, maxUsersPerStatement) {
		states, err := readStates(ctx, tx, s.B, batch, true)
		if err != nil {
			return out, err
		}
		// Reserved, or without an answer: a reservation cut short (its
		// run stopped) may have taken slots before writing one.
		var give, answered []uint64
		for _, id := range batch {
			switch st, ok := states[id]; {
			case !ok:
				give = append(give, id)
			case st == stateReserved:
				give = append(give, id)
				answered = append(answered, id)
			}
		}
		if len(answered) > 0 {
			args := []any{s.B}
			for _, id := range answered {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE frequency_users SET state = 0 WHERE broadcast_id = ? AND user_id IN (`+
				sqldb.InList(len(answered))+`)`, args...); err != nil {
				return out, fmt.Errorf("release capped users: %w", err)
			}
		}
		if err := l.dropSlots(ctx, tx, s.B, give); err != nil {
			return out, err
		}
		out.Released += int64(len(answered))
	}
	return out, nil
}

// retake makes sure users ids, sent, hold a slot of every cap of s, in
// tx: it returns how many had to take one again, and how many found a
// cap full.
func (l *Ledger) retake(ctx context.Context, tx *sql.Tx, s Settlement, ids []uint64) (took, over int64, err error) {
	var zones map[uint64]*time.Location
	now := s.Now.UTC()
	tookSet, overSet := map[uint64]bool{}, map[uint64]bool{}
	for _, c := range s.Set.caps {
		for batch := range slices.Chunk(ids, maxUsersPerStatement) {
			if zones == nil && c.Day && s.Zones != nil {
				if zones, err = s.Zones(ctx, ids); err != nil {
					return 0, 0, fmt.Errorf("zones of sent users: %w", err)
				}
			}
			asked, full, err := takeInTx(ctx, tx, s.B, c, batch, zones, now)
			if err != nil {
				return 0, 0, err
			}
			for _, id := range asked {
				tookSet[id] = true
			}
			for _, id := range full {
				overSet[id] = true
			}
		}
	}
	return int64(len(tookSet)), int64(len(overSet)), nil
}

// takeInTx takes a slot of cap c in tx for each of ids that b holds none
// of: the rows are read with locks, the first free slot upserted, and
// read back (a row another transaction inserted meanwhile stays its own).
// It returns the users who had to take one, and those who hold none.
func takeInTx(ctx context.Context, tx *sql.Tx, b uint64, c config.FrequencyCap, ids []uint64, zones map[uint64]*time.Location, now time.Time) (asked, full []uint64, err error) {
	key := window(c)
	slots, err := readSlots(ctx, tx, key, ids, now, true)
	if err != nil {
		return nil, nil, err
	}
	var want []any
	for _, id := range ids {
		held, free := slots[id].pick(b, c.Max)
		if held {
			continue
		}
		asked = append(asked, id)
		if free < 0 {
			continue
		}
		loc := zones[id]
		if loc == nil {
			loc = time.UTC
		}
		want = append(want, id, key, free, b, expires(c, now, loc).UTC())
	}
	if len(want) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) VALUES `+
			sqldb.Placeholders(len(want)/5, 5)+`
			ON DUPLICATE KEY UPDATE broadcast_id = IF(expires_at <= ?, VALUES(broadcast_id), broadcast_id),
				expires_at = IF(expires_at <= ?, VALUES(expires_at), expires_at)`, append(want, now, now)...); err != nil {
			return nil, nil, fmt.Errorf("take frequency slots again: %w", err)
		}
	}
	if len(asked) > 0 {
		if slots, err = readSlots(ctx, tx, key, asked, now, true); err != nil {
			return nil, nil, err
		}
	}
	for _, id := range asked {
		if held, _ := slots[id].pick(b, c.Max); !held {
			full = append(full, id)
		}
	}
	return asked, full, nil
}

func sortedUnique(ids []uint64) []uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// sweepBatch is how many rows one retention statement deletes: small, so
// that it never holds locks a reservation waits on for long.
const sweepBatch = 5000

// Sweep deletes what the ledger no longer needs: slots that expired
// before expiredBefore (free anyway: deleting them only keeps the table
// small) and the answers of broadcasts that ended before finishedBefore
// (no device of theirs is read again). It returns the rows deleted.
func (l *Ledger) Sweep(ctx context.Context, expiredBefore, finishedBefore time.Time) (int64, error) {
	var total int64
	for _, st := range []struct {
		name, query string
		before      time.Time
	}{
		{"expired frequency slots", "DELETE FROM frequency_slots WHERE expires_at < ? LIMIT ?", expiredBefore},
		{"finished broadcasts' cap answers", `DELETE FROM frequency_users WHERE broadcast_id IN (
			SELECT id FROM broadcasts WHERE status IN ('completed', 'canceled', 'failed') AND finished_at < ?) LIMIT ?`, finishedBefore},
	} {
		for {
			res, err := l.db.ExecContext(ctx, st.query, st.before.UTC(), sweepBatch)
			if err != nil {
				return total, fmt.Errorf("delete %s: %w", st.name, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("delete %s: %w", st.name, err)
			}
			total += n
			if n < sweepBatch {
				break
			}
		}
	}
	return total, nil
}
