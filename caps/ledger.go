package caps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"pushfan/config"
	"pushfan/internal/platform/sqldb"
)

// A user's answer in one broadcast (frequency_users.state).
const (
	stateReleased = 0 // every device read so far ended unsent: the slots were given back
	stateReserved = 1 // holds a slot of every cap: send to all devices
	stateCapped   = 2 // a cap was full: send to none
	stateSent     = 3 // a device was sent
)

// maxUsersPerStatement bounds a statement's IN list and VALUES rows.
const maxUsersPerStatement = 1000

// Ledger reserves and releases users' slots (see the package doc).
type Ledger struct {
	db  *sql.DB
	log *slog.Logger
}

// NewLedger returns the ledger over db.
func NewLedger(db *sql.DB, log *slog.Logger) *Ledger {
	return &Ledger{db: db, log: sqldb.OrDiscard(log)}
}

// Broadcast is who the ledger counts a reservation or a settlement for.
// ID, the running broadcast, keys its answers and holds. Root is the root
// of a resend's chain (the original a resend of a resend of … went over;
// 0 for a broadcast that is no resend): the slots a resend takes are
// its root's, so that a user the original was sent to holds one slot
// for the original and all its resends (see the package doc).
type Broadcast struct {
	ID, Root uint64
}

// owner is the broadcast whose slots b takes and holds.
func (b Broadcast) owner() uint64 {
	if b.Root == 0 {
		return b.ID
	}
	return b.Root
}

// resend reports a broadcast whose slots are another's.
func (b Broadcast) resend() bool { return b.owner() != b.ID }

// User is one user of a page, with the zone their local day is counted in
// (nil: UTC) and how many of the page's targets are theirs (0 counts as
// 1): the targets that hold their answer until a checkpoint settles them.
type User struct {
	ID      uint64
	Zone    *time.Location
	Targets int
}

// Holder is the chunk run a page is reserved for. Its targets hold their
// users' answers (frequency_holds) until the checkpoint that stores their
// outcomes: a user is released only when no target of theirs, in any
// chunk, holds the answer still.
type Holder struct {
	// Chunk is the chunk's number in the broadcast, and Epoch its claim:
	// a takeover (a greater epoch) counts the chunk's holds afresh, as it
	// reads again every target the run before it left unsettled.
	Chunk int
	Epoch uint64
	// Upto is the page's last cursor: a chunk run reads its pages in
	// cursor order, so a page reserved again (a retry after an error)
	// counts its targets once.
	Upto uint64
}

// Reserve answers, for the users of one page of broadcast b's targets
// read by chunk run h, which ones are capped: the others hold a slot of
// every cap in set and may be sent on all their devices. A user already
// answered in b (by an earlier page or another chunk) keeps the answer.
// The page's targets hold their users' answers until a checkpoint of h
// settles them (Settle). It is safe to repeat (a takeover reading the
// page again gets the same answers).
func (l *Ledger) Reserve(ctx context.Context, b Broadcast, h Holder, set Set, users []User, now time.Time) (map[uint64]bool, error) {
	capped := map[uint64]bool{}
	if set.Empty() || len(users) == 0 {
		return capped, nil
	}
	byID := make(map[uint64]User, len(users))
	for _, u := range users {
		byID[u.ID] = u
	}
	ids := slices.Sorted(func(yield func(uint64) bool) {
		for id := range byID {
			if !yield(id) {
				return
			}
		}
	})
	for len(ids) > 0 {
		n := min(len(ids), maxUsersPerStatement)
		if err := l.hold(ctx, b.ID, h, ids[:n], byID); err != nil {
			return nil, fmt.Errorf("reserve frequency slots of broadcast %d: %w", b.ID, err)
		}
		if err := l.reserveBatch(ctx, b, set, ids[:n], byID, now.UTC(), capped); err != nil {
			return nil, fmt.Errorf("reserve frequency slots of broadcast %d: %w", b.ID, err)
		}
		ids = ids[n:]
	}
	return capped, nil
}

// hold counts the page's targets as holding their users' answers in b,
// before the answers are read: from the moment it commits, no checkpoint
// releases these users (Settle sums the holds), so an answer read after
// it as reserved stays reserved until these targets are settled, and one
// released before it is read as released, and reserved again.
//
// The answers are locked (shared) first: a checkpoint releasing a user
// holds its answer locked while it sums the user's holds, so the two
// take turns, in the order the checkpoint takes its locks (answers, then
// holds).
func (l *Ledger) hold(ctx context.Context, b uint64, h Holder, ids []uint64, byID map[uint64]User) error {
	lockArgs := make([]any, 0, len(ids)+1)
	lockArgs = append(lockArgs, b)
	args := make([]any, 0, 6*len(ids))
	for _, id := range ids {
		lockArgs = append(lockArgs, id)
		args = append(args, b, id, h.Chunk, h.Epoch, h.Upto, max(byID[id].Targets, 1))
	}
	return sqldb.InTx(ctx, l.db, l.log, "hold cap answers", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT user_id FROM frequency_users FORCE INDEX (PRIMARY) WHERE broadcast_id = ? AND user_id IN (`+
			sqldb.InList(len(ids))+`) LOCK IN SHARE MODE`, lockArgs...)
		if err != nil {
			return fmt.Errorf("lock cap answers: %w", err)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("lock cap answers: %w", err)
		}
		// Assigned left to right, each reading the columns as assigned
		// so far: targets and upto read the old epoch and upto.
		if _, err := tx.ExecContext(ctx, `INSERT INTO frequency_holds (broadcast_id, user_id, chunk, epoch, upto, targets) VALUES `+
			sqldb.Placeholders(len(ids), 6)+`
			ON DUPLICATE KEY UPDATE
				targets = CASE WHEN VALUES(epoch) > epoch THEN VALUES(targets)
					WHEN VALUES(epoch) = epoch AND VALUES(upto) > upto THEN targets + VALUES(targets)
					ELSE targets END,
				upto = IF(VALUES(epoch) > epoch OR VALUES(epoch) = epoch AND VALUES(upto) > upto, VALUES(upto), upto),
				epoch = GREATEST(epoch, VALUES(epoch))`, args...); err != nil {
			return fmt.Errorf("hold cap answers: %w", err)
		}
		return nil
	})
}

func (l *Ledger) reserveBatch(ctx context.Context, b Broadcast, set Set, ids []uint64, byID map[uint64]User, now time.Time, capped map[uint64]bool) error {
	states, err := l.states(ctx, b.ID, ids)
	if err != nil {
		return err
	}
	var open []uint64 // users without an answer (or released)
	for _, id := range ids {
		switch states[id] {
		case stateCapped:
			capped[id] = true
		case stateReserved, stateSent:
		default:
			open = append(open, id)
		}
	}
	if len(open) == 0 {
		return nil
	}
	// A resend shares its root's slots with the root's other resends: it
	// says which users it holds under them before it reads them, so that
	// a resend giving one back either sees this one or has given it back
	// already (giveBack).
	if b.resend() {
		if err := l.exec(ctx, "share cap slots", shareQuery(len(open)), shareArgs(b, open)...); err != nil {
			return err
		}
	}
	full := map[uint64]bool{}
	in := open
	for _, c := range set.caps {
		lost, err := l.take(ctx, b, c, in, byID, now)
		if err != nil {
			return err
		}
		for _, id := range lost {
			full[id] = true
		}
		in = slices.DeleteFunc(slices.Clone(in), func(id uint64) bool { return full[id] })
	}
	// First answer wins: an answer another chunk of b wrote meanwhile
	// stays, and is what this chunk goes by.
	args := make([]any, 0, 3*len(open))
	for _, id := range open {
		st := stateReserved
		if full[id] {
			st = stateCapped
		}
		args = append(args, b.ID, id, st)
	}
	if err := l.exec(ctx, "write cap answers", `INSERT INTO frequency_users (broadcast_id, user_id, state) VALUES `+
		sqldb.Placeholders(len(open), 3)+` ON DUPLICATE KEY UPDATE state = IF(state = 0, VALUES(state), state)`, args...); err != nil {
		return err
	}
	if states, err = l.states(ctx, b.ID, open); err != nil {
		return err
	}
	var drop []uint64
	for _, id := range open {
		if states[id] == stateCapped {
			capped[id] = true
			drop = append(drop, id)
		}
	}
	// A capped user holds nothing: give back the slots taken for it
	// before a cap turned out full.
	if len(drop) == 0 || !b.resend() {
		return dropSlots(ctx, l.db, b.ID, drop)
	}
	return sqldb.InTx(ctx, l.db, l.log, "give back capped users' slots", func(tx *sql.Tx) error {
		return giveBack(ctx, tx, b, drop)
	})
}

// take reserves one slot of cap c for each of ids, owned by b's owner and
// taken by b, and returns the users for whom c is full.
func (l *Ledger) take(ctx context.Context, b Broadcast, c config.FrequencyCap, ids []uint64, byID map[uint64]User, now time.Time) ([]uint64, error) {
	key := window(c)
	var full []uint64
	pending := ids
	// Every round either settles a user or sees a slot taken by another
	// broadcast since the last read; a user has c.Max slots, so c.Max+1
	// rounds settle everyone.
	for round := 0; len(pending) > 0; round++ {
		if round > c.Max+1 {
			return nil, fmt.Errorf("cap %s: slots still contended after %d rounds", c, round)
		}
		slots, err := l.slots(ctx, key, pending, now)
		if err != nil {
			return nil, err
		}
		var want []any
		var next []uint64
		for _, id := range pending {
			held, free := slots[id].pick(b.owner(), c.Max)
			switch {
			case held:
			case free < 0:
				full = append(full, id)
			default:
				loc := byID[id].Zone
				if loc == nil {
					loc = time.UTC
				}
				want = append(want, id, key, free, b.owner(), b.ID, expires(c, now, loc).UTC())
				next = append(next, id)
			}
		}
		if len(next) == 0 {
			break
		}
		// The row is rewritten only when its slot expired: of two
		// broadcasts racing for it, the second finds it live and keeps
		// the first's. The next round reads which one won.
		if err := l.exec(ctx, "take frequency slots", takeQuery(len(next)), append(want, now, now, now)...); err != nil {
			return nil, err
		}
		pending = next
	}
	return full, nil
}

// takeQuery upserts rows slots (user_id, cap, slot, broadcast_id, taker,
// expires_at), then three times the time now: a row is rewritten only
// when its slot expired (expires_at is assigned last, as the others read
// it).
func takeQuery(rows int) string {
	return `INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, taker, expires_at) VALUES ` +
		sqldb.Placeholders(rows, 6) + `
		ON DUPLICATE KEY UPDATE broadcast_id = IF(expires_at <= ?, VALUES(broadcast_id), broadcast_id),
			taker = IF(expires_at <= ?, VALUES(taker), taker),
			expires_at = IF(expires_at <= ?, VALUES(expires_at), expires_at)`
}

// userSlots are one user's slots of one window: by slot, the broadcast
// holding it while live (0 when expired).
type userSlots map[int]uint64

// pick reports whether b holds a live slot, else the lowest free slot
// below max (-1: none).
func (s userSlots) pick(b uint64, max int) (held bool, free int) {
	free = -1
	for i := range max {
		holder, ok := s[i]
		switch {
		case ok && holder == b:
			return true, 0
		case (!ok || holder == 0) && free < 0:
			free = i
		}
	}
	// A slot above max (a cap lowered since) held by b counts too.
	for i, holder := range s {
		if i >= max && holder == b {
			return true, 0
		}
	}
	return false, free
}

// slots reads ids' slots of window key, live ones with their holder.
func (l *Ledger) slots(ctx context.Context, key string, ids []uint64, now time.Time) (map[uint64]userSlots, error) {
	return readSlots(ctx, l.db, key, ids, now, false)
}

// readSlots is slots through q, with locks when lock is set.
func readSlots(ctx context.Context, q sqldb.Querier, key string, ids []uint64, now time.Time, lock bool) (map[uint64]userSlots, error) {
	args := make([]any, 0, len(ids)+2)
	args = append(args, now, key)
	for _, id := range ids {
		args = append(args, id)
	}
	// FORCE INDEX: the optimizer, from statistics taken while the table
	// was small, may scan the whole table for a long IN list, once per page
	// (seen: 15M rows read for 200k targets); the primary key is always the
	// plan, a range per user.
	query := `SELECT user_id, slot, IF(expires_at > ?, broadcast_id, 0) FROM frequency_slots FORCE INDEX (PRIMARY)
		WHERE cap = ? AND user_id IN (` + sqldb.InList(len(ids)) + `)`
	if lock {
		query += " FOR UPDATE"
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read frequency slots: %w", err)
	}
	defer rows.Close()
	out := make(map[uint64]userSlots, len(ids))
	for rows.Next() {
		var id, holder uint64
		var slot int
		if err := rows.Scan(&id, &slot, &holder); err != nil {
			return nil, fmt.Errorf("read frequency slots: %w", err)
		}
		if out[id] == nil {
			out[id] = userSlots{}
		}
		out[id][slot] = holder
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read frequency slots: %w", err)
	}
	return out, nil
}

// states reads the answers of ids in broadcast b (absent: none yet).
func (l *Ledger) states(ctx context.Context, b uint64, ids []uint64) (map[uint64]int, error) {
	return readStates(ctx, l.db, b, ids, false)
}

func readStates(ctx context.Context, q sqldb.Querier, b uint64, ids []uint64, lock bool) (map[uint64]int, error) {
	out := make(map[uint64]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, b)
	for _, id := range ids {
		args = append(args, id)
	}
	query := `SELECT user_id, state FROM frequency_users FORCE INDEX (PRIMARY) WHERE broadcast_id = ? AND user_id IN (` + sqldb.InList(len(ids)) + `)` // as readSlots
	if lock {
		query += " FOR UPDATE"
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read cap answers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var st int
		if err := rows.Scan(&id, &st); err != nil {
			return nil, fmt.Errorf("read cap answers: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read cap answers: %w", err)
	}
	return out, nil
}

// exec runs one statement on its own, again after a deadlock (InnoDB
// rolled it back): the upserts of racing broadcasts lock the same rows.
func (l *Ledger) exec(ctx context.Context, name, query string, args ...any) error {
	return sqldb.InTx(ctx, l.db, l.log, name, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}
