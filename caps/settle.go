package caps

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"pushfan/config"
	"pushfan/internal/platform/sqldb"
)

// Settlement is what one checkpoint of broadcast B's chunk run Holder
// learned about its users: Sent had a device sent, Unsent had one
// canceled, failed for good or dead (a user may be in both). Each lists
// a user once per target of theirs whose outcome the checkpoint stores:
// those targets hold the user's answer no longer.
type Settlement struct {
	B            Broadcast
	Holder       Holder
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
	// so far was sent, and none is still held (in flight, or read and
	// waiting) by a chunk of the broadcast. A resend gives back its share
	// of its root's slots (shares.go): the slot goes only if the resend
	// took it and no other resend of the root shares it.
	Released int64
	// Held users had only unsent devices here, but another target of
	// theirs still holds the answer: their slots are kept for it, and the
	// checkpoint that settles the last one releases them if none is sent.
	Held int64
	// Retaken users were sent without holding their slots (a cap lowered
	// meanwhile, or answers from before the holds). They took them again.
	// Over are those who found a cap full (another broadcast took the
	// slot in between): sent past the cap.
	Retaken, Over int64
}

// Settle stores, inside a chunk checkpoint's transaction tx, what became
// of the settlement's users. A user with a device sent is sent, and the
// first time, holds a slot of every cap (taking it again if it was given
// back meanwhile). The settled targets hold their users' answers no
// longer. A user with devices unsent and none sent (in this checkpoint or
// before) is released once no target of theirs holds the answer: its
// slots are given back with the outcomes that free them, and a device of
// theirs read later reserves again. A replayed checkpoint runs none of it
// again (package lease).
func (l *Ledger) Settle(ctx context.Context, tx *sql.Tx, s Settlement) (Settled, error) {
	var out Settled
	sent, unsent := sortedUnique(s.Sent), sortedUnique(s.Unsent)
	st := settling{s: s, now: s.Now.UTC(), took: map[uint64]bool{}, over: map[uint64]bool{}}
	for batch := range slices.Chunk(sent, maxUsersPerStatement) {
		if err := st.sent(ctx, tx, batch); err != nil {
			return out, err
		}
	}
	out.Retaken, out.Over = int64(len(st.took)), int64(len(st.over))
	// The unsent users' answers are locked before the holds are touched:
	// the order Reserve takes them in (hold).
	var give, answered []uint64
	for batch := range slices.Chunk(unsent, maxUsersPerStatement) {
		states, err := readStates(ctx, tx, s.B.ID, batch, true)
		if err != nil {
			return out, err
		}
		// Reserved, or without an answer: a reservation cut short (its
		// run stopped) may have taken slots before writing one.
		for _, id := range batch {
			switch st, ok := states[id]; {
			case !ok:
				give = append(give, id)
			case st == stateReserved:
				give = append(give, id)
				answered = append(answered, id)
			}
		}
	}
	if err := unhold(ctx, tx, s); err != nil {
		return out, err
	}
	held, err := stillHeld(ctx, tx, s.B.ID, give)
	if err != nil {
		return out, err
	}
	kept := func(id uint64) bool { return held[id] }
	out.Held = int64(len(answered))
	give, answered = slices.DeleteFunc(give, kept), slices.DeleteFunc(answered, kept)
	out.Held -= int64(len(answered))
	for batch := range slices.Chunk(answered, maxUsersPerStatement) {
		args := []any{s.B.ID}
		for _, id := range batch {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE frequency_users SET state = 0 WHERE broadcast_id = ? AND user_id IN (`+
			sqldb.InList(len(batch))+`)`, args...); err != nil {
			return out, fmt.Errorf("release capped users: %w", err)
		}
	}
	if err := giveBack(ctx, tx, s.B, give); err != nil {
		return out, err
	}
	out.Released = int64(len(answered))
	return out, nil
}

// unhold subtracts the settlement's targets from its chunk run's holds:
// one statement per batch of users and count of targets a user has in
// the checkpoint (almost always 1: a statement a batch). A hold never
// goes below 0 (the targets of a page whose reservation was cut short
// before it held anything are stored canceled too).
func unhold(ctx context.Context, tx *sql.Tx, s Settlement) error {
	counts := map[uint64]int{}
	for _, id := range s.Sent {
		counts[id]++
	}
	for _, id := range s.Unsent {
		counts[id]++
	}
	byCount := map[int][]uint64{}
	for id, n := range counts {
		byCount[n] = append(byCount[n], id)
	}
	for _, n := range slices.Sorted(maps.Keys(byCount)) {
		ids := byCount[n]
		slices.Sort(ids)
		for batch := range slices.Chunk(ids, maxUsersPerStatement) {
			args := []any{n, n, s.B.ID, s.Holder.Chunk, s.Holder.Epoch}
			for _, id := range batch {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE frequency_holds SET targets = IF(targets > ?, targets - ?, 0)
				WHERE broadcast_id = ? AND chunk = ? AND epoch = ? AND user_id IN (`+sqldb.InList(len(batch))+`)`, args...); err != nil {
				return fmt.Errorf("settle cap holds: %w", err)
			}
		}
	}
	return nil
}

// stillHeld reads which of ids a target of broadcast b, in any chunk,
// holds still, locking their holds: a reservation holding one of them
// meanwhile waits for this checkpoint, and then reads what it released.
func stillHeld(ctx context.Context, tx *sql.Tx, b uint64, ids []uint64) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	for batch := range slices.Chunk(ids, maxUsersPerStatement) {
		args := []any{b}
		for _, id := range batch {
			args = append(args, id)
		}
		rows, err := tx.QueryContext(ctx, `SELECT user_id, targets FROM frequency_holds FORCE INDEX (PRIMARY)
			WHERE broadcast_id = ? AND user_id IN (`+sqldb.InList(len(batch))+`) FOR UPDATE`, args...)
		if err != nil {
			return nil, fmt.Errorf("read cap holds: %w", err)
		}
		for rows.Next() {
			var id uint64
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read cap holds: %w", err)
			}
			if n > 0 {
				out[id] = true
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read cap holds: %w", err)
		}
	}
	return out, nil
}

// settling is one Settle's sent users: the users who had to take a slot
// again, and those who found a cap full, over its batches; the zones of
// the batch's users taking a slot of a daily cap, read once a batch.
type settling struct {
	s          Settlement
	now        time.Time
	took, over map[uint64]bool
	zones      map[uint64]*time.Location
}

// sent marks a batch of sent users sent, and makes sure that each, the
// first time it is marked, holds a slot of every cap (taking it again if
// it was given back meanwhile).
//
// The slots are read first, with locks, and the answers only for the
// users missing one: in a checkpoint's usual case (every sent user still
// holds its slots) that is one read per cap and the write, where reading
// every user's answer, then its slots, cost a checkpoint two statements
// more, and the checkpoints are what the store gate waits on. The slots
// stay locked to the end of the transaction, so reading them before the
// answers are written sees what reading them after would.
func (st *settling) sent(ctx context.Context, tx *sql.Tx, batch []uint64) error {
	b, set := st.s.B, st.s.Set
	slots := make([]map[uint64]userSlots, len(set.caps))
	missing := map[uint64]bool{}
	for i, c := range set.caps {
		var err error
		if slots[i], err = readSlots(ctx, tx, window(c), batch, st.now, true); err != nil {
			return err
		}
		for _, id := range batch {
			if held, _ := slots[i][id].pick(b.owner(), c.Max); !held {
				missing[id] = true
			}
		}
	}
	// Of the users missing a slot, those already sent (by an earlier
	// checkpoint) keep what they have: only a user's first send counts.
	var check map[uint64]bool
	if len(missing) > 0 {
		states, err := readStates(ctx, tx, b.ID, slices.Sorted(maps.Keys(missing)), true)
		if err != nil {
			return err
		}
		check = map[uint64]bool{}
		for id := range missing {
			if states[id] != stateSent {
				check[id] = true
			}
		}
	}
	args := make([]any, 0, 3*len(batch))
	for _, id := range batch {
		args = append(args, b.ID, id, stateSent)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO frequency_users (broadcast_id, user_id, state) VALUES `+
		sqldb.Placeholders(len(batch), 3)+` ON DUPLICATE KEY UPDATE state = 3`, args...); err != nil {
		return fmt.Errorf("mark capped users sent: %w", err)
	}
	if len(check) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(check))
	st.zones = nil // this batch's, read when first needed
	took := map[uint64]bool{}
	for i, c := range set.caps {
		asked, full, err := st.take(ctx, tx, c, ids, slots[i])
		if err != nil {
			return err
		}
		for _, id := range asked {
			st.took[id] = true
			took[id] = true
		}
		for _, id := range full {
			st.over[id] = true
		}
	}
	// A resend says it shares the slots it took again, as a reservation
	// does (shares.go).
	if b.resend() && len(took) > 0 {
		ids := slices.Sorted(maps.Keys(took))
		if _, err := tx.ExecContext(ctx, shareQuery(len(ids)), shareArgs(b, ids)...); err != nil {
			return fmt.Errorf("share cap slots: %w", err)
		}
	}
	return nil
}

// take takes a slot of cap c in tx for each of ids that b holds none of
// in slots (read with locks in tx): the first free slot is upserted, and
// read back (a row another transaction inserted meanwhile stays its
// own). It returns the users who had to take one, and those who hold
// none.
func (st *settling) take(ctx context.Context, tx *sql.Tx, c config.FrequencyCap, ids []uint64, slots map[uint64]userSlots) (asked, full []uint64, err error) {
	b, key := st.s.B, window(c)
	var want []any
	for _, id := range ids {
		held, free := slots[id].pick(b.owner(), c.Max)
		if held {
			continue
		}
		asked = append(asked, id)
		if free < 0 {
			continue
		}
		loc, err := st.zone(ctx, c, ids, id)
		if err != nil {
			return nil, nil, err
		}
		want = append(want, id, key, free, b.owner(), b.ID, expires(c, st.now, loc).UTC())
	}
	if len(want) > 0 {
		if _, err := tx.ExecContext(ctx, takeQuery(len(want)/6), append(want, st.now, st.now, st.now)...); err != nil {
			return nil, nil, fmt.Errorf("take frequency slots again: %w", err)
		}
	}
	if len(asked) > 0 {
		if slots, err = readSlots(ctx, tx, key, asked, st.now, true); err != nil {
			return nil, nil, err
		}
	}
	for _, id := range asked {
		if held, _ := slots[id].pick(b.owner(), c.Max); !held {
			full = append(full, id)
		}
	}
	return asked, full, nil
}

// zone is user id's zone for cap c (UTC unless c is daily), reading the
// zones of ids, the users taking a slot again, the first time one is
// needed.
func (st *settling) zone(ctx context.Context, c config.FrequencyCap, ids []uint64, id uint64) (*time.Location, error) {
	if c.Day && st.zones == nil && st.s.Zones != nil {
		zones, err := st.s.Zones(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("zones of sent users: %w", err)
		}
		st.zones = zones
		if st.zones == nil {
			st.zones = map[uint64]*time.Location{}
		}
	}
	if loc := st.zones[id]; loc != nil {
		return loc, nil
	}
	return time.UTC, nil
}

func sortedUnique(ids []uint64) []uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}
