package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
)

// fixture is a fresh database with the lease store on it.
type fixture struct {
	t  *testing.T
	db *sql.DB
	s  *lease.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testdb.New(t).SQL.DB
	return &fixture{t: t, db: db, s: lease.New(db, nil)}
}

func (f *fixture) ctx() context.Context {
	c, cancel := context.WithTimeout(f.t.Context(), time.Minute)
	f.t.Cleanup(cancel)
	return c
}

// broadcast inserts a queued bulk broadcast with the given chunks.
func (f *fixture) broadcast(plans ...lease.Plan) uint64 {
	f.t.Helper()
	return f.broadcastOf(lease.Bulk, plans...)
}

// broadcastOf inserts a queued broadcast of class with the given chunks.
func (f *fixture) broadcastOf(class lease.Class, plans ...lease.Plan) uint64 {
	f.t.Helper()
	ctx := f.ctx()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience) VALUES ('{}', '{"all":true}')`)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), class, plans); err != nil {
		f.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		f.t.Fatal(err)
	}
	return uint64(id)
}

func (f *fixture) claim(owner string, running ...lease.Key) *lease.Claim {
	f.t.Helper()
	c, err := f.s.Claim(f.ctx(), lease.ClaimOptions{Owner: owner, Lease: time.Minute, Running: running})
	if err != nil {
		f.t.Fatalf("claim by %s: %v", owner, err)
	}
	return c
}

// expire makes every lease of broadcast id expired.
func (f *fixture) expire(id uint64) {
	f.t.Helper()
	if _, err := f.db.ExecContext(f.ctx(), "UPDATE broadcast_chunks SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE broadcast_id = ? AND status = 'leased'", id); err != nil {
		f.t.Fatal(err)
	}
}

type counts struct {
	succeeded, failed, canceled, targeted int64
	status                                string
	errors                                int64
}

func (f *fixture) counts(id uint64) counts {
	f.t.Helper()
	var c counts
	if err := f.db.QueryRowContext(f.ctx(), `SELECT succeeded, failed, canceled, targeted, status,
		(SELECT COALESCE(SUM(count), 0) FROM broadcast_errors WHERE broadcast_id = b.id) FROM broadcasts b WHERE id = ?`, id).
		Scan(&c.succeeded, &c.failed, &c.canceled, &c.targeted, &c.status, &c.errors); err != nil {
		f.t.Fatal(err)
	}
	return c
}

func keep(cursor uint64, succeeded int64) lease.Checkpoint {
	return lease.Checkpoint{Cursor: cursor, Succeeded: succeeded, End: lease.KeepLease, Lease: time.Minute}
}

func TestClaimTakesPendingInOrderAndNothingTwice(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10}, lease.Plan{Lo: 10, Hi: 20, Targets: 10})
	a := f.claim("a")
	b := f.claim("b")
	if a == nil || b == nil || a.Seq != 0 || b.Seq != 1 || a.Epoch != 1 || a.Takeover {
		t.Fatalf("claims %+v %+v", a, b)
	}
	if c := f.claim("c"); c != nil {
		t.Fatalf("a third claim got %+v; both chunks are leased", c)
	}
	if got := f.counts(id).status; got != "running" {
		t.Fatalf("broadcast is %s after a claim, want running", got)
	}
}

func TestConcurrentClaimsNeverShareAChunk(t *testing.T) {
	f := newFixture(t)
	var plans []lease.Plan
	for i := range 40 {
		plans = append(plans, lease.Plan{Lo: uint64(i * 10), Hi: uint64(i*10 + 10), Targets: 10})
	}
	f.broadcast(plans...)
	var mu sync.Mutex
	seen := map[int]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				c, err := f.s.Claim(context.Background(), lease.ClaimOptions{Owner: owner, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					return
				}
				mu.Lock()
				if prev, dup := seen[c.Seq]; dup {
					t.Errorf("chunk %d claimed by %s and %s", c.Seq, prev, owner)
				}
				seen[c.Seq] = owner
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("%d chunks claimed, want 40", len(seen))
	}
}

// An expired lease of another owner is taken over with a new epoch; the
// old holder can no longer store anything.
func TestExpiredLeaseOfAnotherOwnerIsFencedOff(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(40, 40)); err != nil {
		t.Fatal(err)
	}
	f.expire(id)
	b := f.claim("b")
	if b == nil || !b.Takeover || b.Epoch != a.Epoch+1 || b.Cursor != 40 || b.CkptSeq != 1 {
		t.Fatalf("takeover claim %+v, want epoch %d at cursor 40", b, a.Epoch+1)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(60, 20)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale holder's checkpoint: %v, want ErrLost", err)
	}
	if _, err := f.s.HandBack(f.ctx(), a, "x"); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale holder's hand-back: %v, want ErrLost", err)
	}
	if got := f.counts(id).succeeded; got != 40 {
		t.Fatalf("succeeded %d after a fenced checkpoint, want 40", got)
	}
	if _, err := f.s.Checkpoint(f.ctx(), b, lease.Checkpoint{Cursor: 100, Succeeded: 60, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 100 || c.targeted != 100 || c.status != "completed" {
		t.Fatalf("final %+v", c)
	}
}

// A restart under a pinned instance id resumes its own expired leases;
// while it still runs a chunk, that chunk is not claimed a second time.
func TestExpiredLeaseOfTheSameOwner(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("pod-0")
	f.expire(id)
	if c := f.claim("pod-0", a.Key); c != nil {
		t.Fatalf("claimed a chunk this instance is running: %+v", c)
	}
	again := f.claim("pod-0")
	if again == nil || again.Seq != a.Seq || again.Epoch != a.Epoch+1 || !again.Takeover {
		t.Fatalf("restart under the same id claimed %+v, want the chunk at epoch %d", again, a.Epoch+1)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(10, 10)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the pre-restart claim checkpointed: %v", err)
	}
}

// An expired lease that nobody took is still its holder's: the next
// checkpoint renews it (a database stall longer than the lease).
func TestExpiredButUntakenLeaseStillCheckpoints(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("a")
	f.expire(id)
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(30, 30)); err != nil {
		t.Fatalf("checkpoint of an expired, untaken lease: %v", err)
	}
	if c := f.claim("b"); c != nil {
		t.Fatalf("the renewed lease was taken: %+v", c)
	}
}

// A checkpoint whose commit answer was lost is retried unchanged; the
// retry is recognised and adds nothing.
func TestCheckpointRetryAfterAnUnknownOutcomeAddsNothingTwice(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("a")
	before := *a
	effects := 0
	cp := keep(50, 45)
	cp.Failed, cp.Errors = 5, map[string]int64{"UNAVAILABLE": 5}
	cp.Done = []lease.Range{{Lo: 60, Hi: 70}}
	cp.Succeeded += 11
	cp.Effects = func(context.Context, *sql.Tx) (int64, error) { effects++; return 2, nil }
	if _, err := f.s.Checkpoint(f.ctx(), a, cp); err != nil {
		t.Fatal(err)
	}
	// The caller never saw the answer: it retries from the state it had.
	lost := before
	res, err := f.s.Checkpoint(f.ctx(), &lost, cp)
	if err != nil || !res.Replayed || res.Invalidated != 2 {
		t.Fatalf("retry: %+v %v, want a replay reporting 2 invalidated", res, err)
	}
	if effects != 1 {
		t.Fatalf("effects ran %d times, want once", effects)
	}
	if c := f.counts(id); c.succeeded != 56 || c.failed != 5 || c.errors != 5 {
		t.Fatalf("counts after a replayed checkpoint: %+v", c)
	}
	if lost.Cursor != 50 || len(lost.Done) != 1 || lost.CkptSeq != 1 {
		t.Fatalf("claim after the replay %+v, want the stored state", lost)
	}
	// A replay is never mistaken for a lost lease, and the next one goes on.
	if _, err := f.s.Checkpoint(f.ctx(), &lost, keep(100, 39)); err != nil {
		t.Fatal(err)
	}
	rows, err := f.s.Chunks(f.ctx(), id)
	if err != nil || rows[0].Cursor != 100 || len(rows[0].Done) != 0 || rows[0].Committed != 100 {
		t.Fatalf("chunk after: %+v %v", rows, err)
	}
}

func TestReleaseHandsTheChunkBackAtOnce(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("a")
	cp := keep(20, 25)
	cp.Done, cp.End = []lease.Range{{Lo: 30, Hi: 34}}, lease.Release
	if _, err := f.s.Checkpoint(f.ctx(), a, cp); err != nil {
		t.Fatal(err)
	}
	b := f.claim("b")
	if b == nil || b.Takeover || b.Cursor != 20 || len(b.Done) != 1 || b.Done[0] != (lease.Range{Lo: 30, Hi: 34}) {
		t.Fatalf("claim after release %+v", b)
	}
	// Releasing again (a retry whose first answer was lost) after another
	// claim is a lost lease, not a second release.
	if _, err := f.s.Checkpoint(f.ctx(), a, cp); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale release: %v", err)
	}
	if got := f.counts(id).succeeded; got != 25 {
		t.Fatalf("succeeded %d", got)
	}
}

// A holder finishing its chunk while another instance takes it over:
// exactly one of them stores the end, and the totals count each target
// once.
func TestFinishRacingATakeover(t *testing.T) {
	for range 20 {
		f := newFixture(t)
		id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
		a := f.claim("a")
		if _, err := f.s.Checkpoint(f.ctx(), a, keep(50, 50)); err != nil {
			t.Fatal(err)
		}
		f.expire(id)
		var wg sync.WaitGroup
		var aErr error
		var b *lease.Claim
		wg.Go(func() {
			_, aErr = f.s.Checkpoint(context.Background(), a, lease.Checkpoint{Cursor: 100, Succeeded: 50, End: lease.Done})
		})
		wg.Go(func() {
			b, _ = f.s.Claim(context.Background(), lease.ClaimOptions{Owner: "b", Lease: time.Minute})
		})
		wg.Wait()
		switch {
		case aErr == nil && b == nil: // a finished first: nothing left to take
		case errors.Is(aErr, lease.ErrLost) && b != nil:
			if _, err := f.s.Checkpoint(f.ctx(), b, lease.Checkpoint{Cursor: 100, Succeeded: 50, End: lease.Done}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("a: %v, b: %+v: exactly one must own the end", aErr, b)
		}
		if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
			t.Fatalf("finish %v %v", ok, err)
		}
		if c := f.counts(id); c.succeeded != 100 || c.targeted != 100 {
			t.Fatalf("final %+v: a target counted twice or not at all", c)
		}
	}
}

// A cancel racing a checkpoint: the chunk's holder either stores its
// checkpoint and then sees the cancel, or finds the chunk closed; the
// canceled count covers exactly what it did not store.
func TestCancelRacingACheckpoint(t *testing.T) {
	for i := range 20 {
		f := newFixture(t)
		id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100}, lease.Plan{Lo: 100, Hi: 200, Targets: 100})
		a := f.claim("a") // chunk 0; chunk 1 stays pending
		f.expire(id)      // a stalled: a cancel may close its chunk too
		var wg sync.WaitGroup
		var cpErr, stopErr error
		var res lease.Result
		wg.Go(func() { res, cpErr = f.s.Checkpoint(context.Background(), a, keep(40, 40)) })
		wg.Go(func() { _, stopErr = f.s.Stop(context.Background(), id, "") })
		wg.Wait()
		if stopErr != nil {
			t.Fatal(stopErr)
		}
		switch {
		case cpErr == nil:
			// The checkpoint went first and renewed the lease, so the
			// cancel left the chunk to its holder, who ends it.
			if !res.CancelRequested {
				if _, err := f.s.Checkpoint(f.ctx(), a, keep(40, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.s.Checkpoint(f.ctx(), a, lease.Checkpoint{Cursor: 100, End: lease.Done, CancelRest: true}); err != nil && !errors.Is(err, lease.ErrLost) {
				t.Fatal(err)
			}
		case !errors.Is(cpErr, lease.ErrLost):
			t.Fatal(cpErr)
		}
		if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
			t.Fatalf("round %d: finish %v %v", i, ok, err)
		}
		if c := f.counts(id); c.succeeded+c.canceled != 200 || c.targeted != 200 || c.status != "canceled" {
			t.Fatalf("round %d (checkpoint err %v): final %+v, want 200 targets counted once", i, cpErr, c)
		}
	}
}

// Stop closes every pending chunk and counts its targets canceled in one
// transaction, from the plan's counts, so a cancel is final at once even
// for a broadcast with thousands of chunks; stopping again is not an
// error, but stopping a completed broadcast is.
func TestStopClosesPendingChunksAndIsIdempotent(t *testing.T) {
	f := newFixture(t)
	var plans []lease.Plan
	for i := range 5000 {
		plans = append(plans, lease.Plan{Lo: uint64(i * 10), Hi: uint64(i*10 + 10), Targets: 7})
	}
	id := f.broadcast(plans...)
	start := time.Now()
	final, err := f.s.Stop(f.ctx(), id, "")
	if err != nil || final {
		t.Fatalf("stop: %v %v", final, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish %v %v", ok, err)
	}
	took := time.Since(start)
	if c := f.counts(id); c.canceled != 35000 || c.targeted != 35000 || c.status != "canceled" {
		t.Fatalf("final %+v", c)
	}
	if final, err := f.s.Stop(f.ctx(), id, ""); err != nil || !final {
		t.Fatalf("second stop: %v %v, want final and no error", final, err)
	}
	if rows, _ := f.s.Chunks(f.ctx(), id); len(rows) != 0 {
		t.Fatalf("%d chunk rows left after finish", len(rows))
	}
	t.Logf("cancel of a broadcast with 5000 queued chunks: final after %v", took.Round(time.Millisecond))

	done := f.broadcast(lease.Plan{Lo: 0, Hi: 1, Targets: 1})
	c := f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: 1, Succeeded: 1, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Finish(f.ctx(), done); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Stop(f.ctx(), done, ""); !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("stopping a completed broadcast: %v, want ErrFinished", err)
	}
	if _, err := f.s.Stop(f.ctx(), 999999, ""); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("stopping an unknown broadcast: %v, want ErrNotFound", err)
	}
}

func TestFinishSummarisesAndCompacts(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 5, Targets: 5}, lease.Plan{Lo: 5, Hi: 9, Targets: 4})
	a, b := f.claim("a"), f.claim("b")
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || ok {
		t.Fatalf("finish with open chunks: %v %v", ok, err)
	}
	for _, c := range []*lease.Claim{a, b} {
		if _, err := f.s.Checkpoint(f.ctx(), c, lease.Checkpoint{Cursor: c.Hi, Succeeded: int64(c.Hi - c.Lo), End: lease.Done}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish %v %v", ok, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || ok {
		t.Fatalf("a second finish reported %v %v, want false", ok, err)
	}
	var summary string
	if err := f.db.QueryRowContext(f.ctx(), "SELECT chunk_summary FROM broadcasts WHERE id = ?", id).Scan(&summary); err != nil {
		t.Fatal(err)
	}
	if want := `{"chunks":2,"claims":2,"takeovers":0,"done_by":{"a":1,"b":1}}`; summary != want {
		t.Fatalf("summary %s, want %s", summary, want)
	}
}

func TestHandBackRecordsSinceWhenNobodyCouldRunIt(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("old-version")
	first, err := f.s.HandBack(f.ctx(), a, `named audience "x" is not configured on this instance`)
	if err != nil || first < 0 || first > time.Second {
		t.Fatalf("hand back: unrunnable for %v (%v), want just now", first, err)
	}
	b := f.claim("old-version-2")
	if b == nil || b.Takeover {
		t.Fatalf("the handed-back chunk was not pending: %+v", b)
	}
	time.Sleep(20 * time.Millisecond) // the second hand-back counts from the first
	second, err := f.s.HandBack(f.ctx(), b, "again")
	if err != nil || second < first+20*time.Millisecond {
		t.Fatalf("second hand back: unrunnable for %v, want at least %v after the first (%v)", second, first+20*time.Millisecond, err)
	}
	c := f.claim("new-version")
	if _, err := f.s.Checkpoint(f.ctx(), c, keep(10, 10)); err != nil {
		t.Fatal(err)
	}
	rows, _ := f.s.Chunks(f.ctx(), id)
	if rows[0].Refusal != "" {
		t.Fatalf("a running instance's checkpoint left the refusal %q", rows[0].Refusal)
	}
}

// Two processes wrongly started with one instance id each hold claims with
// their own epochs: each counts only through its own claim, so the totals
// stay exact.
func TestTwoProcessesWithOneIDCountOnce(t *testing.T) {
	f := newFixture(t)
	var plans []lease.Plan
	for i := range 30 {
		plans = append(plans, lease.Plan{Lo: uint64(i * 10), Hi: uint64(i*10 + 10), Targets: 10})
	}
	id := f.broadcast(plans...)
	var stored atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				c, err := f.s.Claim(context.Background(), lease.ClaimOptions{Owner: "same", Lease: 30 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					return
				}
				time.Sleep(40 * time.Millisecond) // a stall past the lease: the twin may take it over
				_, err = f.s.Checkpoint(context.Background(), c, lease.Checkpoint{Cursor: c.Hi, Succeeded: 10, End: lease.Done})
				switch {
				case err == nil:
					stored.Add(10)
				case !errors.Is(err, lease.ErrLost):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 300 || stored.Load() != 300 {
		t.Fatalf("succeeded %d, stored %d: want every chunk counted once", c.succeeded, stored.Load())
	}
}
