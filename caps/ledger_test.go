package caps_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"pushfan/caps"
	"pushfan/internal/testsupport/testdb"

	_ "github.com/go-sql-driver/mysql"
)

func newLedger(t *testing.T) (*caps.Ledger, *sql.DB) {
	t.Helper()
	tdb := testdb.New(t)
	return caps.NewLedger(tdb.SQL.DB, nil), tdb.SQL.DB
}

func mustParse(t *testing.T, spec string) caps.Set {
	t.Helper()
	set, err := caps.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func users(zone *time.Location, ids ...uint64) []caps.User {
	out := make([]caps.User, len(ids))
	for i, id := range ids {
		out[i] = caps.User{ID: id, Zone: zone}
	}
	return out
}

// reserve answers whether each of ids was let through (true) in b, as
// the next page of chunk 0's run (a greater Upto than any before: the
// clock's nanoseconds, a database round trip apart).
func reserve(t *testing.T, l *caps.Ledger, b uint64, set caps.Set, us []caps.User, now time.Time) map[uint64]bool {
	t.Helper()
	capped, err := l.Reserve(context.Background(), caps.Broadcast{ID: b}, caps.Holder{Upto: uint64(time.Now().UnixNano())}, set, us, now)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, u := range us {
		out[u.ID] = !capped[u.ID]
	}
	return out
}

// Eight broadcasts reserve the same 2,000 users at once, page by page in
// different orders, under 1/day: every user is let through by exactly one
// of them, and holds exactly one slot.
func TestReserveRacingBroadcastsGiveEachUserOne(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	const n, racers, page = 2000, 8, 200
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	got := make([]map[uint64]bool, racers)
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for r := range racers {
		wg.Go(func() {
			got[r] = map[uint64]bool{}
			for p := range n / page {
				// Racers walk the pages in different orders.
				p = (p + r*3) % (n / page)
				us := make([]caps.User, page)
				for i := range us {
					us[i] = caps.User{ID: uint64(p*page + i + 1)}
				}
				capped, err := l.Reserve(context.Background(), caps.Broadcast{ID: uint64(r + 1)}, caps.Holder{Upto: uint64(p + 1)}, set, us, now)
				if err != nil {
					errs <- err
					return
				}
				for _, u := range us {
					got[r][u.ID] = !capped[u.ID]
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
		winners := 0
		for r := range racers {
			if got[r][id] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("user %d let through by %d broadcasts under 1/day, want exactly 1", id, winners)
		}
	}
	var rows, holders int
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM frequency_slots").Scan(&rows, &holders); err != nil {
		t.Fatal(err)
	}
	if rows != n || holders != n {
		t.Errorf("ledger holds %d slots of %d users, want %d of %d", rows, holders, n, n)
	}
}

// A daily cap counts each user's own calendar day: just after midnight in
// Seoul a Seoul user may be sent again, while it is still the same day in
// Los Angeles for a user there.
func TestDailyCapFollowsEachUsersLocalDay(t *testing.T) {
	l, _ := newLedger(t)
	set := mustParse(t, "1/day")
	seoul, _ := time.LoadLocation("Asia/Seoul")
	la, _ := time.LoadLocation("America/Los_Angeles")
	us := append(users(seoul, 1), users(la, 2)...)
	// 2026-12-02 10:00 in Seoul is 2026-12-01 17:00 in Los Angeles.
	first := time.Date(2026, 12, 2, 10, 0, 0, 0, seoul)
	if got := reserve(t, l, 1, set, us, first); !got[1] || !got[2] {
		t.Fatalf("first broadcast of the day: %v, want both let through", got)
	}
	if got := reserve(t, l, 2, set, us, first.Add(time.Hour)); got[1] || got[2] {
		t.Fatalf("second broadcast the same day: %v, want both capped", got)
	}
	// Just before LA's midnight it is still 1 Dec there and 2 Dec in
	// Seoul: both have had their send of the day.
	beforeLAMidnight := time.Date(2026, 12, 1, 23, 59, 0, 0, la) // 2026-12-02 16:59 in Seoul
	if got := reserve(t, l, 3, set, us, beforeLAMidnight); got[1] || got[2] {
		t.Fatalf("still 2 Dec in Seoul and 1 Dec in LA: %v, want both capped", got)
	}
	afterSeoulMidnight := time.Date(2026, 12, 3, 0, 0, 1, 0, seoul) // 2026-12-02 07:00:01 in LA
	got := reserve(t, l, 4, set, us, afterSeoulMidnight)
	if !got[1] || !got[2] {
		t.Fatalf("3 Dec in Seoul and 2 Dec in LA (both new days): %v, want both let through", got)
	}
	// 2026-12-03 00:00:01 in Los Angeles is 2026-12-03 17:00:01 in Seoul:
	// a new day for the LA user only.
	if got := reserve(t, l, 5, set, us, time.Date(2026, 12, 3, 0, 0, 1, 0, la)); got[1] || !got[2] {
		t.Fatalf("3 Dec in both zones, a new day in LA only: %v, want the Seoul user capped and the LA user through", got)
	}
}

// A rolling window frees a slot exactly its width after the send that
// took it.
func TestRollingCapFreesASlotAfterItsWindow(t *testing.T) {
	l, _ := newLedger(t)
	set := mustParse(t, "2/6h")
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	us := users(nil, 7)
	for i, c := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {time.Hour, true}, {2 * time.Hour, false},
		{6*time.Hour - time.Second, false}, // the first send is still inside the window
		{6*time.Hour + time.Second, true},  // its slot is free
		{6*time.Hour + 2*time.Second, false},
		{7*time.Hour + time.Second, true}, // the second send's slot
	} {
		if got := reserve(t, l, uint64(i+1), set, us, t0.Add(c.at))[7]; got != c.want {
			t.Fatalf("send %d at +%v: let through %v, want %v", i+1, c.at, got, c.want)
		}
	}
}

// Several caps apply together: a user needs a slot of each, and one
// capped by any holds none.
func TestSeveralCapsApplyTogether(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/2h,2/day")
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	us := users(nil, 1)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {time.Hour, false}, // 1/2h
		{2*time.Hour + time.Second, true}, // a new 2h window, second of the day
		{5 * time.Hour, false},            // 2/day full, though the 2h window is free
	}
	for i, s := range steps {
		if got := reserve(t, l, uint64(i+1), set, us, t0.Add(s.at))[1]; got != s.want {
			t.Fatalf("send %d at +%v: let through %v, want %v", i+1, s.at, got, s.want)
		}
	}
	// The last one found its 2h slot free, took it, then found the day
	// full: it gave the 2h slot back.
	var held int
	if err := db.QueryRow("SELECT COUNT(*) FROM frequency_slots WHERE broadcast_id = 4").Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("a capped user still holds %d slots of the broadcast that capped it", held)
	}
}

// Devices of one user read by different pages (or chunks) of one
// broadcast get the same answer, even when a slot was freed in between.
func TestAUsersDevicesGetOneAnswer(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	us := users(nil, 1)
	reserve(t, l, 1, set, us, now)
	if reserve(t, l, 2, set, us, now)[1] {
		t.Fatal("broadcast 2 let through a user broadcast 1 holds")
	}
	// Broadcast 1's send did not happen: released at its checkpoint.
	settle(t, l, db, 1, nil, []uint64{1})
	if reserve(t, l, 2, set, us, now)[1] {
		t.Fatal("a later device of a user capped in broadcast 2 was let through after a slot was freed: the user's devices disagree")
	}
	if !reserve(t, l, 3, set, us, now)[1] {
		t.Fatal("broadcast 3 capped a user whose only slot was released")
	}
}

func settle(t *testing.T, l *caps.Ledger, db *sql.DB, b uint64, sent, unsent []uint64) int64 {
	t.Helper()
	return settleAt(t, l, db, b, mustParse(t, "1/day"), time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), sent, unsent).Released
}

func settleAt(t *testing.T, l *caps.Ledger, db *sql.DB, b uint64, set caps.Set, now time.Time, sent, unsent []uint64) caps.Settled {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Settle(context.Background(), tx, caps.Settlement{B: caps.Broadcast{ID: b}, Set: set, Sent: sent, Unsent: unsent, Now: now})
	if err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return got
}

// A user released (every device read so far unsent) whose other device,
// in flight in another chunk, is then sent takes its slot again; if
// another broadcast took it meanwhile, the settlement says the user went
// over the cap.
func TestASentDeviceAfterAReleaseRetakesTheSlot(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	reserve(t, l, 1, set, users(nil, 1, 2), now)
	if got := settleAt(t, l, db, 1, set, now, nil, []uint64{1, 2}); got.Released != 2 {
		t.Fatalf("released %d, want both users", got.Released)
	}
	// User 2's slot goes to broadcast 2 meanwhile.
	if !reserve(t, l, 2, set, users(nil, 2), now)[2] {
		t.Fatal("broadcast 2 could not take user 2's released slot")
	}
	got := settleAt(t, l, db, 1, set, now, []uint64{1, 2}, nil)
	if got.Retaken != 2 || got.Over != 1 {
		t.Fatalf("settled %+v; want both retaken, user 2 over the cap", got)
	}
	if reserve(t, l, 3, set, users(nil, 1), now)[1] {
		t.Fatal("broadcast 3 let user 1 through: the slot broadcast 1 took again is not held")
	}
	// User 5: released, the slot taken by broadcast 2, a later device of
	// theirs answered capped in broadcast 1, then the in-flight one sent.
	reserve(t, l, 1, set, users(nil, 5), now)
	settleAt(t, l, db, 1, set, now, nil, []uint64{5})
	reserve(t, l, 2, set, users(nil, 5), now)
	if reserve(t, l, 1, set, users(nil, 5), now)[5] {
		t.Fatal("a released user's later device was let through though broadcast 2 holds the day")
	}
	if got := settleAt(t, l, db, 1, set, now, []uint64{5}, nil); got.Retaken != 1 || got.Over != 1 {
		t.Fatalf("settled %+v; want user 5 retaken and over the cap", got)
	}
}

// Settle releases a reserved user whose devices all went unsent, keeps a
// user with a device sent (in the same checkpoint or an earlier one), and
// a released user's later device reserves again.
func TestSettleReleasesOnlyUnsentUsers(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	reserve(t, l, 1, set, users(nil, 1, 2, 3, 4), now)
	// User 1: sent. User 2: one device sent, one failed in the same
	// checkpoint. User 3: only failed. User 4: sent, then a later device
	// canceled.
	if n := settle(t, l, db, 1, []uint64{1, 2, 4}, []uint64{2, 3}); n != 1 {
		t.Fatalf("released %d users, want 1 (user 3)", n)
	}
	if n := settle(t, l, db, 1, nil, []uint64{4}); n != 0 {
		t.Fatalf("released %d users, want 0: user 4 had a device sent", n)
	}
	got := reserve(t, l, 2, set, users(nil, 1, 2, 3, 4), now)
	want := map[uint64]bool{1: false, 2: false, 3: true, 4: false}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("user %d let through by the next broadcast: %v, want %v", id, got[id], w)
		}
	}
	// Broadcast 1 reads a later device of user 3 (released): it reserves
	// again and finds the day taken by broadcast 2.
	if reserve(t, l, 1, set, users(nil, 3), now)[3] {
		t.Error("a released user's later device was let through although the day's slot went to another broadcast")
	}
	var st int
	if err := db.QueryRow("SELECT state FROM frequency_users WHERE broadcast_id = 1 AND user_id = 3").Scan(&st); err != nil {
		t.Fatal(err)
	}
	if st != 2 {
		t.Errorf("user 3's answer in broadcast 1 is state %d, want 2 (capped)", st)
	}
}

// Reserve costs a few statements per page whatever its size: never one
// per target. The ledger runs on a pool of one connection, so that the
// session's statement counter (Questions) is its own.
func TestReserveStatementsPerPageDoNotGrowWithThePage(t *testing.T) {
	tdb := testdb.New(t)
	one, err := sql.Open("mysql", tdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	one.SetMaxIdleConns(1)
	one.SetConnMaxLifetime(0)
	l := caps.NewLedger(one, nil)
	set := mustParse(t, "1/2h,3/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	questions := func() int64 {
		var name string
		var n int64
		if err := one.QueryRow("SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var statements []int64
	for _, size := range []int{10, 1000} {
		us := make([]caps.User, size)
		for i := range us {
			us[i] = caps.User{ID: uint64(size*10 + i)}
		}
		before := questions()
		reserve(t, l, uint64(size), set, us, now)
		statements = append(statements, questions()-before-1) // the SHOW itself
	}
	t.Logf("statements to reserve a page of 10 users: %d; of 1,000: %d", statements[0], statements[1])
	if statements[1] != statements[0] || statements[1] > 20 {
		t.Errorf("a page of 1,000 users took %d statements, one of 10 took %d: the cost grows with the page", statements[1], statements[0])
	}
}

// A checkpoint settling sent users who still hold their slots (its usual
// case) reads each cap's slots, writes the answers and settles the holds:
// no answers read, no zones, whatever the count of users. The checkpoints are what a
// run's store gate waits on.
func TestSettlingUsersWhoHoldTheirSlotsTakesAStatementPerCap(t *testing.T) {
	tdb := testdb.New(t)
	one, err := sql.Open("mysql", tdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	one.SetMaxIdleConns(1)
	one.SetConnMaxLifetime(0)
	l := caps.NewLedger(one, nil)
	set := mustParse(t, "1/2h,3/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	us := users(nil, 1, 2, 3, 4, 5)
	reserve(t, l, 1, set, us, now)
	questions := func() int64 {
		var name string
		var n int64
		if err := one.QueryRow("SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := questions()
	tx, err := one.Begin()
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Settle(context.Background(), tx, caps.Settlement{B: caps.Broadcast{ID: 1}, Set: set, Sent: []uint64{1, 2, 3, 4, 5}, Now: now,
		Zones: func(context.Context, []uint64) (map[uint64]*time.Location, error) {
			t.Error("zones read for users who hold their slots")
			return nil, nil
		}})
	if err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	n := questions() - before - 3 // BEGIN, COMMIT, and the SHOW itself
	if got.Retaken != 0 || got.Over != 0 || n != 4 {
		t.Errorf("settled %+v in %d statements; want nothing retaken, in 4 (each cap's slots read, the answers written, the holds settled)", got, n)
	}
}

// Retention deletes the slots long expired and the answers and holds of
// finished broadcasts, and nothing a running broadcast still needs.
func TestSweepDeletesExpiredSlotsAndFinishedAnswers(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	res, err := db.Exec(`INSERT INTO broadcasts (message, audience, status, finished_at) VALUES ('{}', '{"all":true}', 'completed', UTC_TIMESTAMP(6) - INTERVAL 2 DAY)`)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := res.LastInsertId()
	res, err = db.Exec(`INSERT INTO broadcasts (message, audience, status) VALUES ('{}', '{"all":true}', 'running')`)
	if err != nil {
		t.Fatal(err)
	}
	running, _ := res.LastInsertId()
	now := time.Now().UTC()
	reserve(t, l, uint64(done), set, users(nil, 1, 2), now.Add(-72*time.Hour)) // slots expired two days ago
	reserve(t, l, uint64(running), set, users(nil, 3), now)
	n, err := l.Sweep(context.Background(), now.Add(-time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var slots, answers, holds int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM frequency_slots), (SELECT COUNT(*) FROM frequency_users), (SELECT COUNT(*) FROM frequency_holds)").Scan(&slots, &answers, &holds); err != nil {
		t.Fatal(err)
	}
	if n != 6 || slots != 1 || answers != 1 || holds != 1 {
		t.Errorf("swept %d rows, leaving %d slots, %d answers and %d holds; want 6 swept (2 slots, 2 answers, 2 holds), the running broadcast's slot, answer and hold kept", n, slots, answers, holds)
	}
}

// A reservation cut short after it took a slot but before it wrote the
// user's answer (its run was stopped) is given back when the page's
// targets are stored canceled.
func TestSettleReleasesAReservationCutShort(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	reserve(t, l, 1, set, users(nil, 9), now)
	if _, err := db.Exec("DELETE FROM frequency_users WHERE broadcast_id = 1"); err != nil {
		t.Fatal(err)
	}
	settleAt(t, l, db, 1, set, now, nil, []uint64{9})
	if !reserve(t, l, 2, set, users(nil, 9), now)[9] {
		t.Fatal("the slot of a reservation cut short was not given back")
	}
}

// A cap counts per app: a user sent to in one app is not capped in
// another (the same id in two apps' tables may be two people), while two
// broadcasts of one app still share the user's slots.
func TestACapCountsPerApp(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day,2/6h")
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	us := users(time.UTC, 7)
	if !reserve(t, l, 1, set.ForApp("default"), us, now)[7] {
		t.Fatal("the default app's first broadcast was capped")
	}
	if !reserve(t, l, 2, set.ForApp("partner"), us, now)[7] {
		t.Fatal("the partner app's first broadcast was capped by the default app's send")
	}
	if reserve(t, l, 3, set.ForApp("partner"), us, now)[7] {
		t.Fatal("the partner app's second broadcast on the day was let through")
	}
	var keys []string
	rows, err := db.Query("SELECT DISTINCT cap FROM frequency_slots WHERE user_id = 7 ORDER BY cap")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if want := []string{"6h0m0s", "day", "partner/6h0m0s", "partner/day"}; !slices.Equal(keys, want) {
		t.Fatalf("ledger keys %v, want %v", keys, want)
	}
}

// reserveAs reserves us in b for chunk run h, failing the test on error.
func reserveAs(t *testing.T, l *caps.Ledger, b uint64, h caps.Holder, set caps.Set, us []caps.User, now time.Time) map[uint64]bool {
	t.Helper()
	return reserveIn(t, l, caps.Broadcast{ID: b}, h, set, us, now)
}

// reserveIn is reserveAs for a broadcast b that may be a resend.
func reserveIn(t *testing.T, l *caps.Ledger, b caps.Broadcast, h caps.Holder, set caps.Set, us []caps.User, now time.Time) map[uint64]bool {
	t.Helper()
	capped, err := l.Reserve(context.Background(), b, h, set, us, now)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, u := range us {
		out[u.ID] = !capped[u.ID]
	}
	return out
}

func settleAs(t *testing.T, l *caps.Ledger, db *sql.DB, b uint64, h caps.Holder, set caps.Set, now time.Time, sent, unsent []uint64) caps.Settled {
	t.Helper()
	return settleIn(t, l, db, caps.Broadcast{ID: b}, h, set, now, sent, unsent)
}

// settleIn is settleAs for a broadcast b that may be a resend.
func settleIn(t *testing.T, l *caps.Ledger, db *sql.DB, b caps.Broadcast, h caps.Holder, set caps.Set, now time.Time, sent, unsent []uint64) caps.Settled {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Settle(context.Background(), tx, caps.Settlement{B: b, Holder: h, Set: set, Sent: sent, Unsent: unsent, Now: now})
	if err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return got
}

// The over-cap race, in the ledger: user 7's device in chunk 0 fails for
// good while their device in chunk 1, reserved under the same answer, is
// in flight. Chunk 0's checkpoint keeps the slot (chunk 1 holds the
// answer), so a racing broadcast finds the day taken, and chunk 1's send
// needs no slot taken again. Had chunk 1's send failed too, its
// checkpoint releases the user.
func TestAReleaseWaitsForEveryChunkHoldingTheUser(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	c0, c1 := caps.Holder{Chunk: 0, Epoch: 1, Upto: 10}, caps.Holder{Chunk: 1, Epoch: 1, Upto: 2000}
	for _, id := range []uint64{7, 8} {
		if !reserveAs(t, l, 1, c0, set, users(nil, id), now)[id] || !reserveAs(t, l, 1, c1, set, users(nil, id), now)[id] {
			t.Fatalf("broadcast 1 capped user %d on its first push of the day", id)
		}
		c0.Upto, c1.Upto = c0.Upto+1, c1.Upto+1
	}
	if got := settleAs(t, l, db, 1, caps.Holder{Chunk: 0, Epoch: 1}, set, now, nil, []uint64{7, 8}); got.Released != 0 || got.Held != 2 {
		t.Fatalf("chunk 0's checkpoint settled %+v; want both users held for chunk 1, none released", got)
	}
	if reserveAs(t, l, 2, caps.Holder{Upto: 1}, set, users(nil, 7, 8), now)[7] {
		t.Fatal("a racing broadcast took user 7's slot while chunk 1 of broadcast 1 had their device in flight")
	}
	got := settleAs(t, l, db, 1, caps.Holder{Chunk: 1, Epoch: 1}, set, now, []uint64{7}, []uint64{8})
	if got.Retaken != 0 || got.Over != 0 || got.Released != 1 || got.Held != 0 {
		t.Fatalf("chunk 1's checkpoint settled %+v; want user 7 sent on the slot it held, user 8 released", got)
	}
	var slots int
	if err := db.QueryRow("SELECT COUNT(*) FROM frequency_slots WHERE user_id = 7 AND broadcast_id = 1").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 1 {
		t.Errorf("user 7 holds %d slots of broadcast 1, want 1", slots)
	}
	if !reserveAs(t, l, 3, caps.Holder{Upto: 1}, set, users(nil, 8), now)[8] {
		t.Error("user 8, released by the last chunk holding them, is still capped")
	}
}

// A page reserved again by the same run (a retry) counts its targets
// once, and a takeover (a greater epoch) counts the chunk's holds afresh:
// neither leaves a user held for targets nobody will settle.
func TestHoldsCountARetriedPageOnceAndATakeoverAfresh(t *testing.T) {
	l, db := newLedger(t)
	set := mustParse(t, "1/day")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	page := []caps.User{{ID: 4, Targets: 2}}
	run1 := caps.Holder{Chunk: 3, Epoch: 5, Upto: 100}
	reserveAs(t, l, 1, run1, set, page, now)
	reserveAs(t, l, 1, run1, set, page, now) // retried
	// The run dies; the takeover reads the page again.
	run2 := caps.Holder{Chunk: 3, Epoch: 6, Upto: 100}
	reserveAs(t, l, 1, run2, set, page, now)
	if got := settleAs(t, l, db, 1, caps.Holder{Chunk: 3, Epoch: 6}, set, now, nil, []uint64{4}); got.Released != 0 || got.Held != 1 {
		t.Fatalf("one of two targets settled: %+v; want the user held", got)
	}
	if got := settleAs(t, l, db, 1, caps.Holder{Chunk: 3, Epoch: 6}, set, now, nil, []uint64{4}); got.Released != 1 {
		t.Fatalf("both targets settled: %+v; want the user released", got)
	}
}
