package plan

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/internal/platform/lifecycle"
	"pushfan/model"
)

// A broadcast's users are counted once each, whatever chunks their
// devices fell in: 300 users with a token each (user 5's dead, user 7
// with pushes off), a second token for users 1–40 far above the first
// ones (another chunk of 10; user 5 is counted for it: one live device
// is enough; user 7 is not) and a dead third one for user 3. Every kind of audience the planner
// runs is counted with its own predicates: all, a user_ids list (with an
// unknown id), a segment, a resend of some failures, and a short list
// planned inside its submit.
func TestAPlanCountsEachUserOnceAcrossItsChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(300)
	for i := range users {
		users[i].invalid = users[i].id == 5
		users[i].off = users[i].id == 7
	}
	f.seed(users)
	var extra []string
	for id := uint64(1); id <= 40; id++ {
		extra = append(extra, fmt.Sprintf("(%d, %d, 'second-%d', NULL)", 10000+id, id, id))
	}
	extra = append(extra, "(20003, 3, 'third-3', UTC_TIMESTAMP(6))")
	f.exec("INSERT INTO device_tokens (id, user_id, token, invalidated_at) VALUES " + strings.Join(extra, ", "))

	pi := f.start("a", 10, nil)
	check := func(name string, id uint64, devices, people int64) {
		t.Helper()
		pi.finished(t, id)
		if p := f.plan(id); p.Targeted != devices || p.Planning {
			t.Fatalf("%s: %+v, want %d devices targeted", name, p, devices)
		}
		if got := f.usersTargeted(id); got != people {
			t.Fatalf("%s: users_targeted %d, want %d", name, got, people)
		}
	}
	// all: 298 first tokens (not 5's nor 7's), 39 second ones (not 7's).
	check("all", f.submit(model.Audience{All: true}), 298+39, 299)
	// user_ids: 1 (2 devices), 3 (2 live), 5 (1 live), 7 (off), 41 (1), 99999 (none).
	check("user_ids", f.submit(model.Audience{UserIDs: []uint64{1, 3, 5, 7, 41, 99999}}), 2+2+1+1, 4)
	seg := &model.SegmentRef{Name: "low", Version: 1, Filter: []byte(`{"field":"user_id","op":"lt","value":21}`)}
	check("segment", f.submit(model.Audience{Segment: seg}), 18+19, 19) // 1–20 less 5's dead first and 7's

	// A resend of an earlier broadcast's Unavailable failures: users 1–10's
	// first and second tokens failed so, user 2's second token with
	// another code; user 4's second token is dead since.
	prev := f.submit(model.Audience{All: true})
	pi.finished(t, prev)
	var failures []string
	for id := uint64(1); id <= 10; id++ {
		failures = append(failures, fmt.Sprintf("(%d, %d, %d, 'UNAVAILABLE')", prev, id, id))
		code := "UNAVAILABLE"
		if id == 2 {
			code = "INTERNAL"
		}
		failures = append(failures, fmt.Sprintf("(%d, %d, %d, '%s')", prev, 10000+id, id, code))
	}
	f.exec("INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) VALUES " + strings.Join(failures, ", "))
	f.exec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id = 10004")
	// Tokens 1–10 less 5 (dead) and 7 (off); 10001–10010 less 10002, 10004
	// and 10007: users 1–10 but 7.
	check("resend", f.submit(model.Audience{ResendOf: prev, Codes: []string{"UNAVAILABLE"}}), 8+7, 9)

	// A short list is planned inside its submit, and counted there.
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{UserIDs: []uint64{1, 2, 5, 7, 200}}}}
	if err := f.leases.Submit(f.ctx(), b, pi.p.Inline); err != nil {
		t.Fatal(err)
	}
	if b.Status != model.StatusQueued || b.UsersTargeted == nil || *b.UsersTargeted != 4 || f.usersTargeted(b.ID) != 4 || b.Targeted != 2+2+1+1 {
		t.Fatalf("inline: %s, targeted %d, users %v (stored %d); want queued, 6 devices, 4 users", b.Status, b.Targeted, b.UsersTargeted, f.usersTargeted(b.ID))
	}
}

// halfPlanned submits a broadcast to users and plans its first step on
// an instance that dies then (its count of users lost with it); then
// the first chunks' sends mark users 1–10's tokens dead, with the
// broadcast's failures saying so, and a user registers after the
// snapshot (not in this broadcast).
func (f *fixture) halfPlanned(users []user) uint64 {
	f.t.Helper()
	id := f.submit(model.Audience{All: true})
	stopped := make(chan struct{})
	first := f.start("a", 5000, func(pi *planInstance, _ uint64) {
		select {
		case <-stopped:
		default:
			close(stopped)
			pi.stop() // the instance dies after its first step
		}
	})
	select {
	case <-stopped:
	case <-time.After(wait):
		f.t.Fatal("the first step was never stored")
	}
	first.halt(f.t)
	if p := f.plan(id); !p.Planning || p.MaxTokenID != uint64(len(users)) || f.usersNow(id) || !f.countBegun(id) {
		f.t.Fatalf("after the first holder: %+v, count begun %v", p, f.countBegun(id))
	}
	var failures []string
	for _, u := range targets(users[:10]) { // a send's failures are of its targets
		failures = append(failures, fmt.Sprintf("(%d, %d, %d, 'UNREGISTERED')", id, u, u))
	}
	f.exec("INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) VALUES " + strings.Join(failures, ", "))
	f.exec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id <= 10")
	f.exec(fmt.Sprintf("INSERT INTO users (id) VALUES (%d)", len(users)+1))
	f.exec(fmt.Sprintf("INSERT INTO device_tokens (id, user_id, token) VALUES (%d, %d, 'late')", len(users)+1, len(users)+1))
	return id
}

// A plan taken over mid-way does not count its users again while its
// first holder's count may still run: the sweep counts a lost one after
// the plan's end, exactly, though sends marked tokens dead meanwhile
// (the broadcast's own dead tokens count as live) and a user registered
// since (above the snapshot).
func TestATakenOverPlanLeavesALostCountToTheSweep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(3 * planStepRows)
	f.seed(users)
	id := f.halfPlanned(users)
	second := f.start("b", 5000, nil)
	second.finished(t, id)
	second.halt(t)
	want := int64(len(targets(users)))
	if p := f.plan(id); p.Targeted != want || f.usersNow(id) {
		t.Fatalf("after the takeover: %+v, users counted %v; want %d targeted, users left to the sweep", p, f.usersNow(id), want)
	}
	// Later than a count can take (usersLate): the sweep counts it.
	f.exec(fmt.Sprintf("UPDATE broadcasts SET planned_at = planned_at - INTERVAL 1 HOUR, users_count_at = users_count_at - INTERVAL 1 HOUR WHERE id = %d", id))
	f.start("c", 5000, nil)
	if got := f.usersTargeted(id); got != want {
		t.Fatalf("counted by the sweep: %d users, want %d", got, want)
	}
}

// A plan taken over once its first count surely ended is counted by its
// new holder, over the snapshot its first holder fixed, after the first
// chunks' sends marked tokens dead: the exact count.
func TestATakenOverPlanCountsItsUsersOverItsSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(3 * planStepRows)
	f.seed(users)
	id := f.halfPlanned(users)
	f.exec(fmt.Sprintf("UPDATE broadcasts SET users_count_at = users_count_at - INTERVAL 1 HOUR WHERE id = %d", id))
	second := f.start("b", 5000, nil)
	second.finished(t, id)
	want := int64(len(targets(users)))
	if p := f.plan(id); p.Targeted != want || f.usersTargeted(id) != want {
		t.Fatalf("after the takeover: %+v, users %d; want %d each", p, f.usersTargeted(id), want)
	}
}

// countBegun reports whether a count of broadcast id's users began.
func (f *fixture) countBegun(id uint64) bool {
	f.t.Helper()
	var at sql.NullTime
	if err := f.db.SQL.QueryRowContext(f.ctx(), "SELECT users_count_at FROM broadcasts WHERE id = ?", id).Scan(&at); err != nil {
		f.t.Fatal(err)
	}
	return at.Valid
}

func (f *fixture) exec(q string) {
	f.t.Helper()
	if _, err := f.db.SQL.ExecContext(f.ctx(), q); err != nil {
		f.t.Fatal(err)
	}
}

// usersTargeted waits for broadcast id's users_targeted (stored with its
// plan's last step, or just after it) and answers it.
func (f *fixture) usersTargeted(id uint64) int64 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), wait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n sql.NullInt64
		if err := f.db.SQL.QueryRowContext(ctx, "SELECT users_targeted FROM broadcasts WHERE id = ?", id).Scan(&n); err != nil {
			f.t.Fatal(err)
		}
		if n.Valid {
			return n.Int64
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("broadcast %d: users_targeted still null after %v", id, wait)
		case <-tick.C:
		}
	}
}

// usersNow reports whether broadcast id's users_targeted is stored.
func (f *fixture) usersNow(id uint64) bool {
	f.t.Helper()
	var n sql.NullInt64
	if err := f.db.SQL.QueryRowContext(f.ctx(), "SELECT users_targeted FROM broadcasts WHERE id = ?", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n.Valid
}

// The count reads the tokens as they were when its plan started: a send
// that marks a user's only token dead meanwhile (as the plan's own first
// chunks do) leaves the user counted, as the plan counted the token.
func TestTheUsersAreCountedInTheSnapshotOfThePlansStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(100)
	f.seed(users)
	store := f.db.Store.ForApp(model.DefaultApp)
	snap, err := store.SnapshotTx(f.ctx(), f.ctx())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	f.exec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id <= 10") // sent to, dead
	f.exec("INSERT INTO users (id) VALUES (101)")
	f.exec("INSERT INTO device_tokens (id, user_id, token) VALUES (101, 101, 'late')")
	want := int64(len(targets(users)))
	got, err := store.CountPlannedUsers(f.ctx(), snap.Tx, model.Audience{All: true}, 1000)
	if err != nil || got != want {
		t.Fatalf("in the snapshot: %d users (%v), want %d", got, err, want)
	}
	now, err := store.CountPlannedUsers(f.ctx(), nil, model.Audience{All: true}, 100)
	if dead := int64(len(targets(users[:10]))); err != nil || now != want-dead {
		t.Fatalf("now, up to the snapshot's id: %d users (%v), want %d", now, err, want-dead)
	}
}

// A count lost with its planner (killed after the plan's last step was
// stored, before the count was) is counted again by a planner's sweep,
// once the count would surely have ended: here planned an hour ago.
func TestALostCountOfUsersIsCountedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(500)
	f.seed(users)
	f.exec("INSERT INTO device_tokens (user_id, token) SELECT id, CONCAT('second-', id) FROM users WHERE id <= 50")
	id := f.submit(model.Audience{All: true})
	a := f.start("a", 100, nil)
	a.finished(t, id)
	want := f.usersTargeted(id)
	a.halt(t)
	var on int64 // a user with pushes on and a live token: the first, or a second (users 1–50)
	for _, u := range users {
		if !u.off && (!u.invalid || u.id <= 50) {
			on++
		}
	}
	if want != on {
		t.Fatalf("users_targeted %d, want %d", want, on)
	}
	f.exec(fmt.Sprintf("UPDATE broadcasts SET users_targeted = NULL, planned_at = planned_at - INTERVAL 1 HOUR, users_count_at = users_count_at - INTERVAL 1 HOUR WHERE id = %d", id))
	f.start("b", 100, nil)
	if got := f.usersTargeted(id); got != want {
		t.Fatalf("counted again: %d users, want %d", got, want)
	}
}

// Counts that fail for good are recorded on their rows and never tried
// again, so they do not hide a newer lost count from the sweep: 21
// broadcasts whose count fails (their app is gone) before one whose count
// was lost; two sweeps (one a minute) count it, and no failed one is
// tried a second time.
func TestFailedCountsDoNotHideALostOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(50)
	f.seed(users)
	var ids []uint64
	for range 22 {
		ids = append(ids, f.submit(model.Audience{All: true}))
	}
	a := f.start("a", 100, nil)
	a.finished(t, ids...)
	want := f.usersTargeted(ids[21])
	a.halt(t)
	in := fmt.Sprint(ids[0])
	for _, id := range ids[1:21] {
		in += fmt.Sprintf(", %d", id)
	}
	f.exec("UPDATE broadcasts SET users_targeted = NULL, planned_at = planned_at - INTERVAL 1 HOUR, users_count_at = NULL WHERE id IN (" + in + fmt.Sprintf(", %d)", ids[21]))
	f.exec("UPDATE broadcasts SET app = 'gone' WHERE id IN (" + in + ")")
	b := f.start("b", 100, nil)
	b.halt(t) // the sweeps run here, one after the other
	for sweep := 1; sweep <= 2; sweep++ {
		b.p.sweepUsers(f.ctx())
	}
	if got := f.usersTargeted(ids[21]); got != want {
		t.Fatalf("the lost count: %d users, want %d", got, want)
	}
	var failed int
	if err := f.db.SQL.QueryRowContext(f.ctx(), "SELECT COUNT(*) FROM broadcasts WHERE users_count_error IS NOT NULL AND users_targeted IS NULL AND id IN ("+in+")").Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed != 21 {
		t.Fatalf("%d failed counts recorded, want 21", failed)
	}
	left, err := f.db.Store.UncountedUsers(f.ctx(), time.Minute, 100)
	if err != nil || len(left) != 0 {
		t.Fatalf("still to count: %d (%v), want none", len(left), err)
	}
}

// A named audience's count walks its rows up to a bound (usersWalkMax; 10
// rows here): below it the users are counted, each once; above it the
// count fails for good, with the reason recorded.
func TestANamedAudiencesCountIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(30)
	f.seed(users)
	f.exec("INSERT INTO device_tokens (user_id, token) SELECT id, CONCAT('second-', id) FROM users WHERE id <= 5")
	auds, err := audience.Compile([]audience.Definition{{Name: "every", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t " +
		"JOIN users u ON u.id = t.user_id WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"}})
	if err != nil {
		t.Fatal(err)
	}
	in := &instance.Instance{Owner: "a", Lease: time.Minute, DBTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return f.now }, Running: f.ctx(), Group: &lifecycle.Group{}}
	p := New(in, f.db.Store, f.leases, f.apps, &runsSpy{}, Options{
		Named: audience.NewRunner(f.db.SQL),
		Bind:  func(model.Audience) (audience.Bound, error) { return auds[0].Bind(nil) },
	})
	b := &model.Broadcast{Submission: model.Submission{Audience: model.Audience{Name: "every"}}}
	store := f.db.Store.ForApp(model.DefaultApp)
	rows := len(targets(users)) + 5 // users 1–5's second tokens (all live)
	p.late.walkMax = rows
	if n, err := p.usersOf(f.ctx(), store, nil, b, 0); err != nil || n != int64(len(targets(users))) {
		t.Fatalf("%d rows, bound %d: %d users (%v), want %d", rows, rows, n, err, len(targets(users)))
	}
	p.late.walkMax = rows - 1
	_, err = p.usersOf(f.ctx(), store, nil, b, 0)
	if !errors.Is(err, errTooManyRows) || !finalCount(err) {
		t.Fatalf("%d rows, bound %d: %v, want too many rows, final", rows, rows-1, err)
	}
}
