package lease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// planned inserts a broadcast that needs planning (as a submit of a large
// audience stores it).
func (f *fixture) planned() uint64 {
	f.t.Helper()
	res, err := f.db.ExecContext(f.ctx(), `INSERT INTO broadcasts (status, planning, message, audience) VALUES ('planning', 1, '{}', '{"all":true}')`)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return uint64(id)
}

func (f *fixture) claimPlan(owner string) *lease.PlanClaim {
	f.t.Helper()
	pc, err := f.s.ClaimPlan(f.ctx(), owner, time.Minute, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return pc
}

func at(d time.Duration) *time.Time {
	t := time.Now().UTC().Add(d).Truncate(time.Microsecond)
	return &t
}

// A plan stored in steps: the first step's complete chunks can be claimed
// (and the broadcast runs) while the plan goes on; its building chunk is
// never claimed; an instance taking a plan over after its holder died gets
// the cursor, the next seq and the building chunk, and the old holder's
// next step is fenced off; a step whose commit answer was lost is
// recognised when retried; the broadcast finishes only once planned.
func TestAPlanIsStoredInStepsAndResumed(t *testing.T) {
	f := newFixture(t)
	id := f.planned()
	a := f.claimPlan("a")
	if a == nil || a.BroadcastID != id || a.Epoch != 1 || a.Cursor != 0 {
		t.Fatalf("claim plan: %+v", a)
	}
	if again := f.claimPlan("b"); again != nil {
		t.Fatalf("a leased plan was claimed twice: %+v", again)
	}
	step1 := lease.Step{Cursor: 30, Seq: 2, Added: 25, MaxCursor: 100, Width: 20,
		Chunks:   []lease.Plan{{Seq: 0, Lo: 0, Hi: 22, Targets: 20}},
		Building: []lease.Plan{{Seq: 1, Lo: 22, Hi: 30, Targets: 5}}}
	if err := f.s.CommitStep(f.ctx(), a, step1, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The retry of a step whose answer was lost adds nothing.
	replay := *a
	replay.Cursor, replay.Seq = 0, 0
	if err := f.s.CommitStep(f.ctx(), &replay, step1, time.Minute); err != nil {
		t.Fatalf("replayed step: %v", err)
	}
	if c := f.counts(id); c.targeted != 25 || c.status != "planning" {
		t.Fatalf("after step 1: %+v, want 25 targeted, still planning", c)
	}
	c := f.claim("sender")
	if c == nil || c.Seq != 0 {
		t.Fatalf("claimed %+v, want chunk 0 (complete) while the plan goes on", c)
	}
	if more := f.claim("sender-2"); more != nil {
		t.Fatalf("claimed a chunk still being filled: %+v", more)
	}
	if st := f.counts(id).status; st != "running" {
		t.Fatalf("status %s after a claim during planning, want running", st)
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: 22, Succeeded: 20, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || ok {
		t.Fatalf("finish while planning: %v %v, want not finished", ok, err)
	}

	// a dies: its lease lapses, b takes the plan over where it stood.
	if _, err := f.db.ExecContext(f.ctx(), "UPDATE broadcasts SET plan_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	b := f.claimPlan("b")
	if b == nil || b.Epoch != 2 || b.Cursor != 30 || b.Seq != 2 || b.Width != 20 || b.MaxCursor != 100 ||
		len(b.Building) != 1 || b.Building[0].Seq != 1 || b.Building[0].Targets != 5 || b.Building[0].Lo != 22 {
		t.Fatalf("takeover: %+v", b)
	}
	if err := f.s.CommitStep(f.ctx(), a, lease.Step{Cursor: 40, Seq: 2}, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the old holder's step: %v, want ErrLost", err)
	}
	// The last step completes the building chunk (5 of its targets were
	// counted in step 1, 15 more now).
	last := lease.Step{Cursor: 50, Seq: 2, Added: 15, Done: true, Chunks: []lease.Plan{{Seq: 1, Lo: 22, Hi: 41, Targets: 20}}}
	empty := last
	empty.Chunks = []lease.Plan{{Seq: 1, Lo: 41, Hi: 41, Targets: 0}}
	if err := f.s.CommitStep(f.ctx(), b, empty, time.Minute); err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("an empty chunk: %v, want it refused", err)
	}
	if err := f.s.CommitStep(f.ctx(), b, last, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c := f.counts(id); c.targeted != 40 || c.status != "running" {
		t.Fatalf("planned: %+v, want 40 targeted", c)
	}
	d := f.claim("sender")
	if d == nil || d.Seq != 1 || d.Lo != 22 {
		t.Fatalf("claimed %+v, want the completed chunk 1", d)
	}
	if _, err := f.s.Checkpoint(f.ctx(), d, lease.Checkpoint{Cursor: d.Hi, Succeeded: 20, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish once planned and done: %v %v", ok, err)
	}
	if c := f.counts(id); c.status != "completed" || c.succeeded != 40 || c.targeted != 40 {
		t.Fatalf("final %+v", c)
	}
}

// A cancel while a plan runs closes it (its next step is fenced off), and
// counts every chunk the plan stored, the one being filled too, canceled:
// nothing is read from the audience, and the broadcast is final at once.
func TestCancelClosesAPlanInProgress(t *testing.T) {
	f := newFixture(t)
	id := f.planned()
	pc := f.claimPlan("a")
	if err := f.s.CommitStep(f.ctx(), pc, lease.Step{Cursor: 300, Seq: 3, Added: 250,
		Chunks:   []lease.Plan{{Seq: 0, Lo: 0, Hi: 100, Targets: 100}, {Seq: 1, Lo: 100, Hi: 200, Targets: 100, NotBefore: at(time.Hour)}},
		Building: []lease.Plan{{Seq: 2, Lo: 200, Hi: 300, Targets: 50}}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if w := f.waiting(id); w != 100 {
		t.Fatalf("waiting %d, want the 100 targets of the chunk due in an hour", w)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.s.CommitStep(f.ctx(), pc, lease.Step{Cursor: 400, Seq: 3, Added: 10}, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a step after the cancel: %v, want ErrLost", err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish after the cancel: %v %v", ok, err)
	}
	if c := f.counts(id); c.status != "canceled" || c.canceled != 250 || c.targeted != 250 || f.waiting(id) != 0 {
		t.Fatalf("final %+v (waiting %d), want canceled, 250 targets counted from the plan", c, f.waiting(id))
	}
	if again := f.claimPlan("b"); again != nil {
		t.Fatalf("a canceled plan was claimed: %+v", again)
	}
}

func (f *fixture) waiting(id uint64) int64 {
	f.t.Helper()
	var w int64
	if err := f.db.QueryRowContext(f.ctx(), "SELECT waiting FROM broadcasts WHERE id = ?", id).Scan(&w); err != nil {
		f.t.Fatal(err)
	}
	return w
}

// Waiting chunks cost the claim nothing: with 20 broadcasts' 500 waiting
// chunks each in the table, claiming a small broadcast's chunk reads as
// many chunk rows as on an idle table. The promoter makes them pending
// when due, by their own index, and takes them off waiting.
func TestWaitingChunksCostTheClaimNothing(t *testing.T) {
	tdb := testdb.New(t)
	f := &fixture{t: t, db: tdb.SQL.DB, s: lease.New(tdb.SQL.DB, nil)}
	rr := testdb.NewRowsRead(t, tdb.SQL)
	claimOne := func() int64 {
		id := f.broadcastOf(lease.Bulk, lease.Plan{Lo: 0, Hi: 3, Targets: 3})
		var c *lease.Claim
		read := rr.During(func() { c = f.claim("x") }, "broadcast_chunks")["broadcast_chunks"]
		if c == nil || c.BroadcastID != id {
			t.Fatalf("claimed %+v, want the small broadcast %d's chunk", c, id)
		}
		if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: 3, Succeeded: 3, End: lease.Done}); err != nil {
			t.Fatal(err)
		}
		if ok, err := f.s.Finish(f.ctx(), id); !ok || err != nil {
			t.Fatal(ok, err)
		}
		return read
	}
	idle := claimOne()
	var later []uint64
	for range 20 {
		var plans []lease.Plan
		for k := range 500 {
			plans = append(plans, lease.Plan{Lo: uint64(k * 10), Hi: uint64(k*10 + 10), Targets: 10, NotBefore: at(time.Hour)})
		}
		later = append(later, f.broadcastOf(lease.Bulk, plans...))
	}
	busy := claimOne()
	t.Logf("a claim read %d chunk rows on an idle table, %d with 10,000 waiting chunk rows", idle, busy)
	if busy > idle+2 {
		t.Fatalf("a claim read %d chunk rows with 10,000 waiting, %d without: the claim reads waiting rows", busy, idle)
	}
	if w := f.waiting(later[0]); w != 5000 {
		t.Fatalf("waiting %d, want 5000", w)
	}
	// Due: the promoter makes them pending, and only them.
	if _, err := f.db.ExecContext(f.ctx(), "UPDATE broadcast_chunks SET not_before = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE broadcast_id = ? AND seq < 3", later[0]); err != nil {
		t.Fatal(err)
	}
	var n int
	read := rr.During(func() {
		var err error
		if n, err = f.s.PromoteWaiting(f.ctx(), 500); err != nil {
			t.Fatal(err)
		}
	}, "broadcast_chunks")["broadcast_chunks"]
	if n != 3 || f.waiting(later[0]) != 4970 {
		t.Fatalf("promoted %d (waiting %d), want 3 and 4970", n, f.waiting(later[0]))
	}
	if read > 3*4 {
		t.Fatalf("promoting 3 due chunks read %d chunk rows: the promoter reads what is due only", read)
	}
	c := f.claim("y")
	if c == nil || c.BroadcastID != later[0] || c.Seq >= 3 {
		t.Fatalf("claimed %+v, want a promoted chunk of %d", c, later[0])
	}
}

// Ending a chunk costs the same however many chunks the broadcast has:
// the broadcast row counts its open chunks, so no chunk end reads the
// others (a finish pre-check over every done row made 2,000 chunk ends
// read about two million rows). Pacing reads the leased rows only, and a
// list of broadcasts reads no chunk row at all.
func TestChunkEndsPacingAndListsReadNoOtherChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("claims and ends 2,000 chunks")
	}
	tdb := testdb.New(t)
	f := &fixture{t: t, db: tdb.SQL.DB, s: lease.New(tdb.SQL.DB, nil)}
	rr := testdb.NewRowsRead(t, tdb.SQL)
	const chunks = 2000
	var plans []lease.Plan
	for k := range chunks {
		plans = append(plans, lease.Plan{Lo: uint64(k), Hi: uint64(k + 1), Targets: 1})
	}
	id := f.broadcast(plans...)
	// Leases of an hour: 2,000 claims take more than fixture's minute on a
	// loaded machine, and an expired lease would be claimed again.
	claim := func() *lease.Claim {
		c, err := f.s.Claim(f.ctx(), lease.ClaimOptions{Owner: "x", Lease: time.Hour})
		if err != nil || c == nil {
			t.Fatalf("claim: %v %v", c, err)
		}
		return c
	}
	claims := []*lease.Claim{claim(), claim()}
	var st repository.PaceState
	pace := rr.During(func() {
		var err error
		if st, err = tdb.Store.Pace(f.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}, "broadcast_chunks")["broadcast_chunks"]
	if st.Running != 2 {
		t.Fatalf("pace: %+v, want 2 running", st)
	}
	for range chunks - 2 {
		claims = append(claims, claim())
	}
	var ends int64
	for i, c := range claims {
		read := rr.During(func() {
			if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: c.Hi, Succeeded: 1, End: lease.Done}); err != nil {
				t.Fatal(err)
			}
			ok, err := f.s.Finish(f.ctx(), id)
			if err != nil || ok != (i == chunks-1) {
				t.Fatalf("finish after chunk end %d: %v %v", i, ok, err)
			}
		}, "broadcast_chunks")["broadcast_chunks"]
		if i < chunks-1 {
			ends += read
		}
	}
	t.Logf("%d chunk ends read %d chunk rows (%.1f each); a pace read %d", chunks-1, ends, float64(ends)/float64(chunks-1), pace)
	if ends > 5*(chunks-1) {
		t.Fatalf("%d chunk ends read %d chunk rows: want a few each, whatever the broadcast's size", chunks-1, ends)
	}
	if pace > 2+2 {
		t.Fatalf("a pace read %d chunk rows with 2 leased of %d: want the leased rows by their index, not every row", pace, chunks)
	}
	// A list of broadcasts with chunks waiting reads none of them.
	for range 10 {
		f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10, NotBefore: at(time.Hour)}, lease.Plan{Lo: 10, Hi: 20, Targets: 10})
	}
	store := tdb.Store
	list := rr.During(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bs, err := store.ListBroadcasts(ctx, model.ListFilter{Limit: 50})
		if err != nil || len(bs) != 11 || !slices.ContainsFunc(bs, func(b *model.Broadcast) bool { return b.Waiting == 10 }) {
			t.Fatalf("list: %d broadcasts, %v", len(bs), err)
		}
	}, "broadcast_chunks")["broadcast_chunks"]
	if list != 0 {
		t.Fatalf("listing broadcasts read %d chunk rows, want none", list)
	}
}

// A chunk's target list is dropped once nothing reads it again: when the
// chunk is done, and when a cancel closes it. (A local-time plan stores
// 1–2 bytes per target, which stayed for the retention period.)
func TestDoneChunksDropTheirTargetLists(t *testing.T) {
	f := newFixture(t)
	id := f.planned()
	pc := f.claimPlan("a")
	ids := func(lo uint64) []uint64 { return []uint64{lo + 1, lo + 5, lo + 9} }
	if err := f.s.CommitStep(f.ctx(), pc, lease.Step{Cursor: 30, Seq: 2, Added: 6, Done: true,
		Chunks: []lease.Plan{{Seq: 0, Lo: 0, Hi: 10, Targets: 3, IDs: ids(0)}, {Seq: 1, Lo: 10, Hi: 20, Targets: 3, IDs: ids(10), NotBefore: at(time.Hour)}}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	lists := func() (n int) {
		t.Helper()
		if err := f.db.QueryRowContext(f.ctx(), "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? AND target_ids IS NOT NULL", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := lists(); n != 2 {
		t.Fatalf("%d chunks hold a target list after the plan, want 2", n)
	}
	c := f.claim("sender")
	if c == nil || c.Seq != 0 || !slices.Equal(c.IDs, ids(0)) {
		t.Fatalf("claimed %+v, want chunk 0 with its list", c)
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: c.Hi, Succeeded: 3, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 1 {
		t.Fatalf("%d chunks hold a target list after chunk 0 is done, want 1 (the waiting one)", n)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 0 {
		t.Fatalf("%d chunks hold a target list after the cancel, want 0", n)
	}
	if c := f.counts(id); c.succeeded != 3 || c.canceled != 3 || c.targeted != 6 {
		t.Fatalf("final %+v, want 3 succeeded, 3 canceled of 6", c)
	}
}
