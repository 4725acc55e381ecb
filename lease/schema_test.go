package lease_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/repository"
)

// Releases side by side: an instance of release N (schema v) runs beside
// N+1 (schema v+1), which raises the schema fence before it migrates. From
// then on N moves nothing on (no claim, no chunk or broadcast ended, no
// plan step, no cancel, no promotion, no repair); it still stores what it
// sent and hands its chunks back, and its plan's release counts no failed
// attempt. N+1 ends the chunks with its own bookkeeping: the broadcast
// ends exact.
func TestAnOlderReleaseMovesNothingOnOnceTheFenceRises(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	v := repository.SchemaVersion()
	old, cur := lease.New(f.db, nil), lease.New(f.db, nil)
	old.SetSchema(v)
	cur.SetSchema(v + 1)
	var told atomic.Int64
	old.OnOutdated(func(fence, schema int64) {
		if fence != v+1 || schema != v {
			t.Errorf("told fence %d, schema %d; want %d and %d", fence, schema, v+1, v)
		}
		told.Add(1)
	})
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10}, lease.Plan{Lo: 10, Hi: 20, Targets: 10}, lease.Plan{Lo: 20, Hi: 30, Targets: 10})
	var claims []*lease.Claim
	for range 3 {
		c, err := old.Claim(ctx, lease.ClaimOptions{Owner: "old", Lease: time.Minute})
		if err != nil || c == nil {
			t.Fatalf("claim before the fence rose: %v %v", c, err)
		}
		claims = append(claims, c)
	}
	if _, err := old.Checkpoint(ctx, claims[0], keep(claims[0].Lo+3, 3)); err != nil {
		t.Fatal(err)
	}
	// A broadcast to end: its one chunk ended, by a release that keeps
	// no counter (Finish's to end, its counter at 0).
	ended := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10})
	f.endAsTheOldReleaseDid(ended, 0, 10)
	if _, err := f.db.ExecContext(ctx, "UPDATE broadcasts SET open_chunks = 0 WHERE id = ?", ended); err != nil {
		t.Fatal(err)
	}
	planID := f.planned()
	pc, err := old.ClaimPlan(ctx, "old", time.Minute, nil)
	if err != nil || pc == nil || pc.BroadcastID != planID {
		t.Fatalf("plan claim before the fence rose: %+v %v", pc, err)
	}

	if err := repository.RaiseFence(ctx, f.db, v+1); err != nil {
		t.Fatal(err)
	}
	if c, err := old.Claim(ctx, lease.ClaimOptions{Owner: "old", Lease: time.Minute}); !errors.Is(err, lease.ErrOutdated) || c != nil {
		t.Fatalf("claim by the older release after the fence rose: %+v %v, want ErrOutdated", c, err)
	}
	// Its checkpoints store what it sent; the one that would end the chunk
	// hands it back instead.
	res, err := old.Checkpoint(ctx, claims[0], keep(claims[0].Lo+5, 2))
	if err != nil || !res.Outdated {
		t.Fatalf("checkpoint after the fence rose: %+v %v, want it stored and Outdated", res, err)
	}
	res, err = old.Checkpoint(ctx, claims[1], lease.Checkpoint{Cursor: claims[1].Hi, Succeeded: 10, End: lease.Done})
	if err != nil || !res.Outdated {
		t.Fatalf("ending checkpoint after the fence rose: %+v %v", res, err)
	}
	if _, err := old.Checkpoint(ctx, claims[0], lease.Checkpoint{Cursor: claims[0].Lo + 5, End: lease.Release}); err != nil {
		t.Fatalf("release after the fence rose: %v", err)
	}
	if _, err := old.HandBack(ctx, claims[2], "outdated"); err != nil {
		t.Fatalf("hand-back after the fence rose: %v", err)
	}
	rows, err := old.Chunks(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Status != lease.StatusPending {
			t.Fatalf("chunk %d is %s after the older release stored and handed back, want pending: %+v", r.Seq, r.Status, rows)
		}
	}
	if rows[0].Cursor != 5 || rows[1].Cursor != 20 || rows[1].Committed != 10 || f.openChunks(id) != 3 || f.counts(id).succeeded != 15 {
		t.Fatalf("after the hand-backs: chunks %+v, open_chunks %d, counts %+v; want cursors 5 and 20, 15 succeeded, 3 open", rows, f.openChunks(id), f.counts(id))
	}
	// Nothing else moves on.
	if ok, err := old.Finish(ctx, ended); ok || !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if _, err := old.Stop(ctx, id, ""); !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("cancel: %v", err)
	}
	if _, _, err := old.Repair(ctx, id); !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("repair: %v", err)
	}
	if _, err := old.PromoteWaiting(ctx, 10); !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("promote waiting: %v", err)
	}
	if _, err := old.PromoteDue(ctx); !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("promote due: %v", err)
	}
	if err := old.CommitStep(ctx, pc, lease.Step{Cursor: 10, Seq: 1, Added: 10, Chunks: []lease.Plan{{Seq: 0, Lo: 0, Hi: 10, Targets: 10}}}, time.Minute); !errors.Is(err, lease.ErrOutdated) {
		t.Fatalf("plan step: %v", err)
	}
	if failures, err := old.ReleasePlan(ctx, pc, time.Minute, true); err != nil || failures != 0 {
		t.Fatalf("plan released after a step refused: %d failures, %v; want none counted", failures, err)
	}
	if again, err := cur.ClaimPlan(ctx, "new", time.Minute, nil); err != nil || again == nil || again.BroadcastID != planID {
		t.Fatalf("the newer release's plan claim: %+v %v; the handed-back plan is claimable at once", again, err)
	}
	if n := told.Load(); n != 1 {
		t.Fatalf("OnOutdated called %d times, want once", n)
	}
	// The newer release ends every chunk with its bookkeeping.
	for range 3 {
		c, err := cur.Claim(ctx, lease.ClaimOptions{Owner: "new", Lease: time.Minute})
		if err != nil || c == nil {
			t.Fatalf("the newer release's claim: %v %v", c, err)
		}
		left := int64(c.Hi) - int64(c.Cursor)
		if _, err := cur.Checkpoint(ctx, c, lease.Checkpoint{Cursor: c.Hi, Succeeded: left, End: lease.Done}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []uint64{id, ended} {
		if ok, err := cur.Finish(ctx, b); !ok || err != nil {
			t.Fatalf("finish of %d by the newer release: %v %v", b, ok, err)
		}
	}
	if c := f.counts(id); c.status != "completed" || c.succeeded != 30 || c.targeted != 30 {
		t.Fatalf("broadcast %+v, want completed with 30 of 30", c)
	}
}

// The fence is exact: raising it waits for a transition in flight (one
// holds the fence row under its shared lock), so no transition of the
// older release commits after a newer one has begun to migrate.
func TestRaisingTheFenceWaitsForTransitionsInFlight(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx()
	v := repository.SchemaVersion()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var fence int64
	if err := tx.QueryRowContext(ctx, "SELECT version FROM schema_fence WHERE id = 1 LOCK IN SHARE MODE").Scan(&fence); err != nil {
		t.Fatal(err)
	}
	if fence != v {
		t.Fatalf("fence %d after the migration, want this build's %d", fence, v)
	}
	raised := make(chan error, 1)
	go func() { raised <- repository.RaiseFence(ctx, f.db, v+1) }()
	// The raise waits on the row lock (the server says so), not a timer.
	testdb.WaitForLockWait(t, f.db, "schema_fence", 30*time.Second)
	select {
	case err := <-raised:
		t.Fatalf("the fence rose (%v) while a transition held it", err)
	default:
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-raised:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fence did not rise after the transition committed")
	}
	if err := f.db.QueryRowContext(ctx, "SELECT version FROM schema_fence WHERE id = 1").Scan(&fence); err != nil || fence != v+1 {
		t.Fatalf("fence %d %v, want %d", fence, err, v+1)
	}
	// Never lowered: an older release starting later leaves it.
	if err := repository.RaiseFence(ctx, f.db, v); err != nil {
		t.Fatal(err)
	}
	if err := f.db.QueryRowContext(ctx, "SELECT version FROM schema_fence WHERE id = 1").Scan(&fence); err != nil || fence != v+1 {
		t.Fatalf("fence %d %v after an older release's raise, want %d", fence, err, v+1)
	}
}
