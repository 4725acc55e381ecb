package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
)

// endAsTheOldReleaseDid ends chunk seq of broadcast id with n succeeded as
// the release before migration 00014 does: the chunk row done and the
// counters added, open_chunks left as it is (that release has no such
// column to keep).
func (f *fixture) endAsTheOldReleaseDid(id uint64, seq int, n int64) {
	f.t.Helper()
	ctx := f.ctx()
	if _, err := f.db.ExecContext(ctx, `UPDATE broadcast_chunks SET status = 'done', done_by = 'old-release', cursor_id = hi_id,
			committed = committed + ?, lease_owner = NULL, lease_until = NULL WHERE broadcast_id = ? AND seq = ?`, n, id, seq); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "UPDATE broadcasts SET succeeded = succeeded + ? WHERE id = ?", n, id); err != nil {
		f.t.Fatal(err)
	}
}

// openChunks reads a broadcast's open_chunks counter.
func (f *fixture) openChunks(id uint64) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.QueryRowContext(f.ctx(), "SELECT open_chunks FROM broadcasts WHERE id = ?", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// The strand: a broadcast whose chunks are all done, one of them
// ended by a release that does not keep open_chunks, is never finished by
// a chunk end (the counter stays at 1). The repair finds it and finishes
// it exactly, once, with two instances repairing at the same moment; a
// broadcast still sending and one Finish's to end are left alone.
func TestRepairFinishesAStrandedBroadcastOnce(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	stranded := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10}, lease.Plan{Lo: 10, Hi: 20, Targets: 10}, lease.Plan{Lo: 20, Hi: 30, Targets: 10})
	var claims []*lease.Claim
	for range 3 {
		claims = append(claims, f.claim("new"))
	}
	// The old release ends chunk 0 after the migration counted it open.
	f.endAsTheOldReleaseDid(stranded, claims[0].Seq, 10)
	for _, c := range claims[1:] {
		if _, err := f.s.Checkpoint(ctx, c, lease.Checkpoint{Cursor: c.Hi, Succeeded: 10, End: lease.Done}); err != nil {
			t.Fatal(err)
		}
		if ok, err := f.s.Finish(ctx, stranded); ok || err != nil {
			t.Fatalf("Finish after chunk %d: %v %v; the counter keeps it open", c.Seq, ok, err)
		}
	}
	running := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10}, lease.Plan{Lo: 10, Hi: 20, Targets: 10})
	if open := f.openChunks(stranded); open != 1 {
		t.Fatalf("open_chunks %d after every chunk ended, want the strand's 1", open)
	}
	// The running broadcast: one chunk done, one sending.
	r0 := f.claim("new")
	f.claim("new")
	if _, err := f.s.Checkpoint(ctx, r0, lease.Checkpoint{Cursor: r0.Hi, Succeeded: 10, End: lease.Done}); err != nil {
		t.Fatal(err)
	}

	ids, err := f.s.Stranded(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != stranded {
		t.Fatalf("Stranded found %v, want only %d", ids, stranded)
	}
	// Two instances repair it at once: one repairs it.
	stores := []*lease.Store{f.s, lease.New(f.db, nil)}
	var wg sync.WaitGroup
	repaired := make([]bool, 2)
	counted := make([]int64, 2)
	errs := make([]error, 2)
	for i, s := range stores {
		wg.Go(func() { counted[i], repaired[i], errs[i] = s.Repair(ctx, stranded) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if repaired[0] == repaired[1] {
		t.Fatalf("repaired by the two instances: %v (counters they found %v), want exactly one", repaired, counted)
	}
	if c := f.counts(stranded); c.status != "completed" || c.succeeded != 30 || c.targeted != 30 || c.failed != 0 || c.canceled != 0 {
		t.Fatalf("repaired broadcast %+v, want completed with 30 of 30 succeeded", c)
	}
	if rows, err := f.s.Chunks(ctx, stranded); err != nil || len(rows) != 0 {
		t.Fatalf("chunk rows after the repair: %v %v; Finish folds them into the summary", rows, err)
	}
	if open := f.openChunks(stranded); open != 0 {
		t.Fatalf("open_chunks %d after the repair", open)
	}
	// Again: nothing to repair.
	if _, again, err := f.s.Repair(ctx, stranded); again || err != nil {
		t.Fatalf("a second repair: %v %v", again, err)
	}
	// The running one is never touched, by the search or by a repair.
	if _, ok, err := f.s.Repair(ctx, running); ok || err != nil {
		t.Fatalf("repair of a broadcast still sending: %v %v", ok, err)
	}
	if c := f.counts(running); c.status != "running" || c.succeeded != 10 {
		t.Fatalf("running broadcast %+v after the repairs, want it running with 10 succeeded", c)
	}
	if rows, _ := f.s.Chunks(ctx, running); len(rows) != 2 || rows[1].Status != lease.StatusLeased {
		t.Fatalf("running broadcast's chunks %+v", rows)
	}
	if ids, err := f.s.Stranded(ctx, 10); err != nil || len(ids) != 0 {
		t.Fatalf("Stranded after the repair: %v %v", ids, err)
	}
}

// A counter at 0 is Finish's (Unfinished), and a plan still running has
// chunks to come: neither is the repair's, all chunk rows done or not.
func TestRepairLeavesPlansAndFinishersAlone(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	planning := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10})
	zero := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10})
	f.endAsTheOldReleaseDid(planning, 0, 10)
	f.endAsTheOldReleaseDid(zero, 0, 10)
	if _, err := f.db.ExecContext(ctx, "UPDATE broadcasts SET planning = 1, status = 'planning' WHERE id = ?", planning); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "UPDATE broadcasts SET open_chunks = 0 WHERE id = ?", zero); err != nil {
		t.Fatal(err)
	}
	if ids, err := f.s.Stranded(ctx, 10); err != nil || len(ids) != 0 {
		t.Fatalf("Stranded: %v %v, want none", ids, err)
	}
	for _, id := range []uint64{planning, zero} {
		if _, ok, err := f.s.Repair(ctx, id); ok || err != nil {
			t.Fatalf("repair of %d: %v %v", id, ok, err)
		}
	}
	if c := f.counts(planning); c.status != "planning" {
		t.Fatalf("a broadcast still planning is %s after a repair", c.status)
	}
	if ok, err := f.s.Finish(ctx, zero); !ok || err != nil {
		t.Fatalf("Finish of the broadcast whose counter is right: %v %v", ok, err)
	}
}

// The search costs what the open broadcasts are, not the table: with
// 20,000 finished broadcasts and 200 running ones of 500 chunk rows each
// (499 done and one leased, the worst order for a scan from 'done'), it
// reads the open broadcasts' rows and at most two chunk index entries
// each, and finds the one stranded broadcast among them.
func TestStrandedReadsTheOpenBroadcastsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 100,000 chunk rows")
	}
	tdb := testdb.New(t)
	f := &fixture{t: t, db: tdb.SQL.DB, s: lease.New(tdb.SQL.DB, nil)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	const finished, open, chunks = 20000, 200, 500
	exec(fmt.Sprintf(`INSERT INTO broadcasts (id, message, audience, status, finished_at) SELECT seq, '{}', '{"all":true}', 'completed', UTC_TIMESTAMP(6)
		FROM seq_1_to_%d`, finished))
	exec(fmt.Sprintf(`INSERT INTO broadcasts (id, message, audience, status, open_chunks) SELECT %d + seq, '{}', '{"all":true}', 'running', 1
		FROM seq_1_to_%d`, finished, open))
	exec(fmt.Sprintf(`INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id, status, done_by)
		SELECT %d + b.seq, c.seq, c.seq * 10, c.seq * 10 + 10, c.seq * 10 + 10, IF(c.seq = %d, 'leased', 'done'), 'x'
		FROM seq_1_to_%d b JOIN seq_0_to_%d c`, finished, chunks-1, open, chunks-1))
	// One of them stranded: its last chunk ended by the old release.
	stranded := uint64(finished + open/2)
	exec("UPDATE broadcast_chunks SET status = 'done' WHERE broadcast_id = ?", stranded)
	exec("ANALYZE TABLE broadcasts, broadcast_chunks")
	rr := testdb.NewRowsRead(t, tdb.SQL)
	var ids []uint64
	read := rr.During(func() {
		var err error
		if ids, err = f.s.Stranded(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}, "broadcasts", "broadcast_chunks")
	t.Logf("Stranded over %d finished and %d running broadcasts (%d chunk rows): read %v rows, found %v", finished, open, open*chunks, read, ids)
	if len(ids) != 1 || ids[0] != stranded {
		t.Fatalf("Stranded found %v, want [%d]", ids, stranded)
	}
	if read["broadcasts"] > 2*open {
		t.Fatalf("read %d broadcast rows for %d open broadcasts: the search scans finished ones", read["broadcasts"], open)
	}
	if read["broadcast_chunks"] > 2*open+2 {
		t.Fatalf("read %d chunk rows for %d open broadcasts: the search scans their done chunks", read["broadcast_chunks"], open)
	}
}
