package caps_test

import (
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pushfan/caps"
	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
)

// insertBroadcast stores a broadcast with status, finished_at (SQL) and,
// for a resend, its original.
func insertBroadcast(t *testing.T, db *sql.DB, status, finished string, parent uint64) uint64 {
	t.Helper()
	trigger, parentID := "api", any(nil)
	if parent != 0 {
		trigger, parentID = "resend", parent
	}
	res, err := db.Exec(`INSERT INTO broadcasts (message, audience, status, finished_at, trigger_kind, parent_id)
		VALUES ('{}', '{"all":true}', ?, `+finished+`, ?, ?)`, status, trigger, parentID)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return uint64(id)
}

// userSlots counts user's live slots and lists their owners.
func liveSlots(t *testing.T, db *sql.DB, user uint64, now time.Time) []uint64 {
	t.Helper()
	rows, err := db.Query("SELECT broadcast_id FROM frequency_slots WHERE user_id = ? AND expires_at > ? ORDER BY broadcast_id", user, now)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var b uint64
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A resend running while its root ended more than an hour ago keeps its
// answers and holds through retention's sweep (issue 38, defect 3): they
// are its own, not its root's. Keyed by the root, the sweep deleted them
// mid-run; here chunk 0's checkpoint then gave user 7's slot back while
// chunk 1 had their other device in flight, and a racing broadcast took
// the day.
func TestARunningResendKeepsItsAnswersAndHoldsThroughTheSweep(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.SQL.DB
	l := caps.NewLedger(db, nil)
	set := mustParse(t, "1/day")
	now := time.Now().UTC()
	root := insertBroadcast(t, db, "completed", "UTC_TIMESTAMP(6) - INTERVAL 2 HOUR", 0)
	resend := caps.Broadcast{ID: insertBroadcast(t, db, "running", "NULL", root), Root: root}
	// The original sent user 8; user 7's devices all failed.
	reserveAs(t, l, root, caps.Holder{Upto: 1}, set, users(nil, 7, 8), now)
	settleAs(t, l, db, root, caps.Holder{}, set, now, []uint64{8}, []uint64{7})

	// The resend reads user 7's devices in chunks 0 and 1, user 8's in 0.
	c0, c1 := caps.Holder{Chunk: 0, Epoch: 1, Upto: 10}, caps.Holder{Chunk: 1, Epoch: 1, Upto: 20}
	if got := reserveIn(t, l, resend, c0, set, users(nil, 7, 8), now); !got[7] || !got[8] {
		t.Fatalf("resend, chunk 0: %v; want both users through (7 released by the original, 8 sent by it)", got)
	}
	if got := reserveIn(t, l, resend, c1, set, users(nil, 7), now); !got[7] {
		t.Fatalf("resend, chunk 1: %v; want user 7 through", got)
	}
	swept, err := l.Sweep(t.Context(), now.Add(-time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	answers := count(t, db, "SELECT COUNT(*) FROM frequency_users WHERE broadcast_id = ?", resend.ID)
	holds := count(t, db, "SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id = ?", resend.ID)
	rootRows := count(t, db, "SELECT (SELECT COUNT(*) FROM frequency_users WHERE broadcast_id = ?) + (SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id = ?)", root, root)
	if answers != 2 || holds != 3 || rootRows != 0 {
		t.Errorf("after the sweep (%d rows): the resend keeps %d answers and %d holds, the original %d rows; want 2 and 3 kept, the original's gone",
			swept, answers, holds, rootRows)
	}

	// Chunk 0's device of user 7 fails; chunk 1's is in flight.
	if got := settleIn(t, l, db, resend, caps.Holder{Chunk: 0, Epoch: 1}, set, now, []uint64{8}, []uint64{7}); got.Released != 0 || got.Held != 1 {
		t.Fatalf("chunk 0's checkpoint settled %+v; want user 7 held for chunk 1", got)
	}
	if got := reserveAs(t, l, 99, caps.Holder{Upto: 1}, set, users(nil, 7, 8), now); got[7] || got[8] {
		t.Fatalf("a racing broadcast: %v; want both users capped (7 held by the resend, 8 by the original)", got)
	}
	if got := settleIn(t, l, db, resend, caps.Holder{Chunk: 1, Epoch: 1}, set, now, []uint64{7}, nil); got.Retaken != 0 || got.Over != 0 {
		t.Fatalf("chunk 1's checkpoint settled %+v; want user 7 sent on the slot it held", got)
	}
	for _, u := range []uint64{7, 8} {
		if got := liveSlots(t, db, u, now); !slices.Equal(got, []uint64{root}) {
			t.Errorf("user %d holds slots of %v; want one, the original's", u, got)
		}
	}

	// Once the resend has ended an hour ago, its rows go too (its shares
	// of the root's slots: users 7 and 8).
	if n := count(t, db, "SELECT COUNT(*) FROM frequency_shares WHERE broadcast_id = ?", resend.ID); n != 2 {
		t.Errorf("the resend shares its root's slots for %d users, want 2", n)
	}
	mustExec(t, db, "UPDATE broadcasts SET status = 'completed', finished_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR WHERE id = ?", resend.ID)
	if _, err := l.Sweep(t.Context(), now.Add(-time.Hour), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	left := count(t, db, `SELECT (SELECT COUNT(*) FROM frequency_users WHERE broadcast_id IN (?, ?)) + (SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id IN (?, ?))
		+ (SELECT COUNT(*) FROM frequency_shares WHERE broadcast_id IN (?, ?))`, root, resend.ID, root, resend.ID, root, resend.ID)
	if left != 0 {
		t.Errorf("%d answers, holds and shares of the original and its resend left after both ended, want none", left)
	}
	if got := liveSlots(t, db, 7, now); !slices.Equal(got, []uint64{root}) {
		t.Errorf("user 7 holds slots of %v after the sweep; want the day's, the original's", got)
	}
}

// A resend counts as its original: a user the original was sent to gets
// the resend (on another device) without a second slot, even when the
// day is full, and the resend's failure there gives back nothing (the
// original's send stands). A user the original did not reach takes a
// slot, the original's, so the original and its resends hold one.
func TestAResendCountsAsItsOriginalWithoutASecondSlot(t *testing.T) {
	l, db := newLedger(t)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	twice := mustParse(t, "2/day")
	const root = 1
	resend := caps.Broadcast{ID: 2, Root: root}
	reserveAs(t, l, root, caps.Holder{Upto: 1}, twice, users(nil, 1, 2), now)
	settleAs(t, l, db, root, caps.Holder{}, twice, now, []uint64{1}, []uint64{2})

	if got := reserveIn(t, l, resend, caps.Holder{Upto: 1}, twice, users(nil, 1, 2), now); !got[1] || !got[2] {
		t.Fatalf("the resend: %v; want both users through", got)
	}
	// User 1 holds one slot, the original's: a second broadcast of the
	// day reaches them, a third does not. User 2 holds the slot the
	// resend took, as its root's.
	if got := reserveAs(t, l, 3, caps.Holder{Upto: 1}, twice, users(nil, 1), now); !got[1] {
		t.Fatal("a second broadcast of the day was capped: the resend took a second slot for user 1")
	}
	if got := reserveAs(t, l, 4, caps.Holder{Upto: 1}, twice, users(nil, 1), now); got[1] {
		t.Fatal("a third broadcast of the day reached user 1 under 2/day")
	}
	if got := liveSlots(t, db, 2, now); !slices.Equal(got, []uint64{root}) {
		t.Errorf("user 2 holds slots of %v; want one, the original's (taken by its resend)", got)
	}
	// The resend's devices fail for both: user 1 keeps the original's
	// slot, user 2 gives back the one the resend took.
	if got := settleIn(t, l, db, resend, caps.Holder{}, twice, now, nil, []uint64{1, 2}); got.Released != 2 {
		t.Fatalf("the resend's checkpoint settled %+v; want both of its answers released", got)
	}
	if got := liveSlots(t, db, 1, now); !slices.Equal(got, []uint64{root, 3}) {
		t.Errorf("user 1 holds slots of %v; want the original's and broadcast 3's", got)
	}
	if got := liveSlots(t, db, 2, now); len(got) != 0 {
		t.Errorf("user 2 holds slots of %v; want none (the resend's send did not happen)", got)
	}
	if got := reserveAs(t, l, 5, caps.Holder{Upto: 1}, twice, users(nil, 1), now); got[1] {
		t.Fatal("after the resend's failure, a broadcast reached user 1 past 2/day: the original's slot was given back")
	}

	// Under 1/day, user 3 had the original: the resend still reaches them.
	once := mustParse(t, "1/day")
	reserveAs(t, l, 10, caps.Holder{Upto: 1}, once, users(nil, 3), now)
	settleAs(t, l, db, 10, caps.Holder{}, once, now, []uint64{3}, nil)
	if got := reserveIn(t, l, caps.Broadcast{ID: 11, Root: 10}, caps.Holder{Upto: 1}, once, users(nil, 3), now); !got[3] {
		t.Fatal("a resend was capped for a user its original was sent to")
	}
	if got := liveSlots(t, db, 3, now); !slices.Equal(got, []uint64{10}) {
		t.Errorf("user 3 holds slots of %v; want the original's only", got)
	}
}

// Two resends of one original at once (issue 38, defect 3): each chunk 0
// holds its users in a row of its own (they shared one, and the second's
// page, read at a lower cursor, counted nothing), and each checkpoint
// gives back only what nobody sent. The original sent users 1-4 and
// failed on 5-12; broadcast 50 took the day of 11 and 12 since.
func TestTwoResendsOfOneOriginalHoldApartAndSettleApart(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	const root = 1
	all := users(nil, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	reserveAs(t, l, root, caps.Holder{Upto: 1}, set, all, now)
	settleAs(t, l, db, root, caps.Holder{}, set, now, []uint64{1, 2, 3, 4}, []uint64{5, 6, 7, 8, 9, 10, 11, 12})
	reserveAs(t, l, 50, caps.Holder{Upto: 1}, set, users(nil, 11, 12), now)

	r1, r2 := caps.Broadcast{ID: 2, Root: root}, caps.Broadcast{ID: 3, Root: root}
	for _, r := range []struct {
		b    caps.Broadcast
		upto uint64
	}{{r1, 100}, {r2, 50}} {
		got := reserveIn(t, l, r.b, caps.Holder{Chunk: 0, Epoch: 1, Upto: r.upto}, set, all, now)
		for id := uint64(1); id <= 12; id++ {
			if got[id] != (id <= 10) {
				t.Fatalf("resend %d: user %d through %v; want users 1-10 through, 11 and 12 capped", r.b.ID, id, got[id])
			}
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id IN (?, ?, ?) AND chunk = 0 AND targets = 1", root, r1.ID, r2.ID); n != 24 {
		t.Errorf("the chunk 0s of the two resends hold %d rows of one target, want 24: one per resend and user", n)
	}
	for id := uint64(1); id <= 10; id++ {
		if got := liveSlots(t, db, id, now); !slices.Equal(got, []uint64{root}) {
			t.Fatalf("user %d holds slots of %v; want one, the original's", id, got)
		}
	}

	// Resend 2 sends users 5 and 6; its other targets fail.
	if got := settleIn(t, l, db, r1, caps.Holder{Chunk: 0, Epoch: 1}, set, now, []uint64{5, 6}, []uint64{1, 2, 7, 8, 9, 10}); got.Released != 6 || got.Held != 0 {
		t.Fatalf("resend 2 settled %+v; want its answers of 1, 2, 7-10 released", got)
	}
	// Resend 3 still has 7-10 in flight under the slots resend 2 took.
	if got := reserveAs(t, l, 60, caps.Holder{Upto: 1}, set, all, now); slices.ContainsFunc(all, func(u caps.User) bool { return got[u.ID] }) {
		t.Fatalf("a racing broadcast: %v; want every user capped (1-4 by the original, 5 and 6 sent by resend 2, 7-10 held by resend 3, 11 and 12 by broadcast 50)", got)
	}
	// Resend 3 sends 7 and 8; 9 and 10 fail there too.
	if got := settleIn(t, l, db, r2, caps.Holder{Chunk: 0, Epoch: 1}, set, now, []uint64{7, 8}, []uint64{1, 2, 3, 4, 5, 6, 9, 10}); got.Retaken != 0 || got.Over != 0 || got.Released != 8 {
		t.Fatalf("resend 3 settled %+v; want 7 and 8 sent on the slots they held, its other answers released", got)
	}
	got := reserveAs(t, l, 70, caps.Holder{Upto: 1}, set, all, now)
	for id := uint64(1); id <= 12; id++ {
		if got[id] != (id == 9 || id == 10) {
			t.Errorf("broadcast 70: user %d through %v; want only 9 and 10, whom neither resend reached", id, got[id])
		}
	}
	for id := uint64(1); id <= 8; id++ {
		if got := liveSlots(t, db, id, now); !slices.Equal(got, []uint64{root}) {
			t.Errorf("user %d holds slots of %v; want one, the original's", id, got)
		}
	}
}

// reservedPage is a page a test's resend reserved, and the outcomes its
// checkpoint will store.
type reservedPage struct {
	p            int
	h            caps.Holder
	sent, unsent []uint64
}

// Two resends of one original race over its 400 users, page by page, each
// page's checkpoint a few pages after its reservation:
// resend 2 sends the odd users and fails the even ones, resend 3 fails
// all. The original sent users 301-400 and failed 1-300; broadcast 50
// took the day of 281-300 since. However the two interleave, each user
// ends with exactly the slots the cap rule says: one, the original's, for
// a user the original or a resend reached; none for the others; and no
// checkpoint finds a sent user without its slot.
func TestTwoResendsRacingOverOneOriginalsUsersEndExact(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	const root, n, page = 1, 400, 40
	ids := func(from, to uint64) []uint64 {
		var out []uint64
		for id := from; id <= to; id++ {
			out = append(out, id)
		}
		return out
	}
	reserveAs(t, l, root, caps.Holder{Upto: 1}, set, users(nil, ids(1, n)...), now)
	settleAs(t, l, db, root, caps.Holder{}, set, now, ids(301, n), ids(1, 300))
	reserveAs(t, l, 50, caps.Holder{Upto: 1}, set, users(nil, ids(281, 300)...), now)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r, sends := range []func(uint64) bool{
		func(id uint64) bool { return id%2 == 1 },
		func(uint64) bool { return false },
	} {
		b := caps.Broadcast{ID: uint64(r + 2), Root: root}
		wg.Go(func() {
			// Each page is settled three pages after its reservation (the
			// engine reserves ahead of the sends); resend 3 starts two
			// pages ahead of resend 2.
			const lag, pages = 3, n / page
			var reserved []reservedPage
			for step := range pages + lag {
				if step < pages {
					p := (step + 2*r) % pages
					us := users(nil, ids(uint64(p*page+1), uint64(p*page+page))...)
					h := caps.Holder{Chunk: p, Epoch: 1, Upto: uint64(p + 1)}
					capped, err := l.Reserve(t.Context(), b, h, set, us, now)
					if err != nil {
						errs <- err
						return
					}
					rp := reservedPage{p: p, h: h}
					for _, u := range us {
						switch {
						case capped[u.ID]:
						case sends(u.ID):
							rp.sent = append(rp.sent, u.ID)
						default:
							rp.unsent = append(rp.unsent, u.ID)
						}
					}
					reserved = append(reserved, rp)
				}
				if step < lag {
					continue
				}
				rp := reserved[step-lag]
				// As a checkpoint does: again after a deadlock.
				var got caps.Settled
				err := sqldb.InTx(t.Context(), db, nil, "checkpoint", func(tx *sql.Tx) (err error) {
					got, err = l.Settle(t.Context(), tx, caps.Settlement{B: b, Holder: rp.h, Set: set, Sent: rp.sent, Unsent: rp.unsent, Now: now})
					return err
				})
				if err == nil && (got.Retaken != 0 || got.Over != 0) {
					err = fmt.Errorf("resend %d, page %d: settled %+v; want no sent user found without its slot", b.ID, rp.p, got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id := uint64(1); id <= n; id++ {
		var want []uint64
		switch {
		case id > 300:
			want = []uint64{root}
		case id > 280:
			want = []uint64{50}
		case id%2 == 1:
			want = []uint64{root}
		}
		if got := liveSlots(t, db, id, now); !slices.Equal(got, want) {
			t.Errorf("user %d holds slots of %v, want %v", id, got, want)
		}
	}
	if got := count(t, db, "SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id IN (2, 3)"); got != 2*n {
		t.Errorf("the resends hold %d rows, want one per resend and user (%d)", got, 2*n)
	}
}
