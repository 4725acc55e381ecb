package lease_test

import (
	"errors"
	"testing"
	"time"

	"pushfan/lease"
)

// rowsOf counts broadcast id's rows in table.
func (f *fixture) rowsOf(table string, id uint64) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRowContext(f.ctx(), "SELECT COUNT(*) FROM "+table+" WHERE broadcast_id = ?", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// A holder paused past its lease, whose chunk a cancel closed, still
// stores what it sent: its targets move out of canceled into succeeded and
// failed, once each (a retry after a lost answer is a replay), the counts
// still add up, and its final checkpoint ends the record, on a broadcast
// already final.
func TestLateHolderAfterACancelStoresWhatItSent(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100}, lease.Plan{Lo: 100, Hi: 200, Targets: 100})
	a := f.claim("a") // chunk 0; chunk 1 stays pending
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(20, 20)); err != nil {
		t.Fatal(err)
	}
	f.expire(id) // a pauses past its lease; nobody takes the chunk over
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish after the cancel: %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 20 || c.canceled != 180 || c.targeted != 200 || c.status != "canceled" {
		t.Fatalf("after the cancel: %+v, want 20 succeeded and 180 canceled", c)
	}

	// a wakes: 15 sent and 3 failed since its last checkpoint.
	late := lease.Checkpoint{Cursor: 38, Succeeded: 15, Failed: 3, Errors: map[string]int64{"UNREGISTERED": 3}, End: lease.KeepLease, Lease: time.Minute}
	seqBefore := a.CkptSeq
	res, err := f.s.Checkpoint(f.ctx(), a, late)
	if err != nil || !res.Late || !res.CancelRequested {
		t.Fatalf("late checkpoint: %+v %v, want stored, late, and the cancel seen", res, err)
	}
	want := counts{succeeded: 35, failed: 3, canceled: 162, targeted: 200, status: "canceled", errors: 3}
	if c := f.counts(id); c != want {
		t.Fatalf("after the late checkpoint: %+v, want %+v", c, want)
	}
	// Its answer lost: the retry is recognised and adds nothing.
	retry := *a
	retry.CkptSeq = seqBefore
	if res, err := f.s.Checkpoint(f.ctx(), &retry, late); err != nil || !res.Replayed {
		t.Fatalf("retried late checkpoint: %+v %v, want a replay", res, err)
	}
	if c := f.counts(id); c != want {
		t.Fatalf("after the retry: %+v, want %+v", c, want)
	}
	// Its engine stopped: the last in-flight sends and the end.
	if _, err := f.s.Checkpoint(f.ctx(), a, lease.Checkpoint{Cursor: 100, Succeeded: 2, Canceled: 60, End: lease.Done, CancelRest: true}); err != nil {
		t.Fatal(err)
	}
	want.succeeded, want.canceled = 37, 160
	if c := f.counts(id); c != want {
		t.Fatalf("after the final late checkpoint: %+v, want %+v", c, want)
	}
	if n := f.rowsOf("late_holders", id); n != 0 {
		t.Fatalf("%d late holder rows after the holder's last checkpoint, want 0", n)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(100, 5)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a checkpoint after the last: %v, want ErrLost", err)
	}
	if c := f.counts(id); c != want {
		t.Fatalf("after a checkpoint past the end: %+v, want %+v", c, want)
	}
}

// A cancel closes a chunk under a stalled holder that had taken it over
// from another stalled one: both report later, and each target counts
// once, by whichever reported it first; the one at the close replays a
// retried checkpoint as usual.
func TestHoldersStalledInTurnCountEachTargetOnceAfterACancel(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 30, outcomes(21, 30, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	f.expire(id) // now b stalls too, and the cancel closes its chunk
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if c := f.counts(id); c.succeeded != 30 || c.canceled != 70 {
		t.Fatalf("after the cancel: %+v, want 30 succeeded and 70 canceled", c)
	}
	// a, fenced off by b's takeover, sent 21..40: 31..40 were counted canceled.
	if res, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 40, outcomes(21, 40, lease.OutcomeSucceeded))); err != nil || !res.Late {
		t.Fatalf("the first holder's late checkpoint: %+v %v", res, err)
	}
	// b sent 31..45 since its last checkpoint: only 41..45 are news.
	last := sends(lease.Done, 100, outcomes(31, 45, lease.OutcomeSucceeded))
	last.CancelRest = true
	seqBefore := b.CkptSeq
	if res, err := f.s.Checkpoint(f.ctx(), b, last); err != nil || !res.Late {
		t.Fatalf("the second holder's late checkpoint: %+v %v", res, err)
	}
	retry := *b
	retry.CkptSeq = seqBefore
	if res, err := f.s.Checkpoint(f.ctx(), &retry, last); err != nil || !res.Replayed {
		t.Fatalf("the second holder's retry: %+v %v, want a replay", res, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 45 || c.canceled != 55 || c.targeted != 100 {
		t.Fatalf("final %+v, want 45 succeeded (20 + 10 + 10 of a's + 5 of b's) and 55 canceled", c)
	}
}

// A late holder's sends beyond what the close counted canceled (its
// chunk's audience grew since the plan) raise targeted, so the counts
// still add up.
func TestLateHolderBeyondThePlanRaisesTargeted(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 10})
	a := f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), a, keep(8, 8)); err != nil {
		t.Fatal(err)
	}
	f.expire(id)
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, lease.Checkpoint{Cursor: 100, Succeeded: 5, End: lease.Done}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 13 || c.canceled != 0 || c.targeted != 13 {
		t.Fatalf("final %+v, want 13 succeeded of 13 targeted", c)
	}
}
