package lease_test

import (
	"errors"
	"testing"
	"time"

	"pushfan/lease"
)

// outcomes lists targets lo..hi (inclusive) with one outcome; a failed
// one carries the code UNREGISTERED.
func outcomes(lo, hi uint64, kind lease.OutcomeKind) []lease.TargetOutcome {
	var out []lease.TargetOutcome
	for x := lo; x <= hi; x++ {
		o := lease.TargetOutcome{Cursor: x, Kind: kind}
		if kind == lease.OutcomeFailed {
			o.Code = "UNREGISTERED"
		}
		out = append(out, o)
	}
	return out
}

// sends is a checkpoint of the outcomes outs, counted.
func sends(end lease.End, cursor uint64, outs ...[]lease.TargetOutcome) lease.Checkpoint {
	cp := lease.Checkpoint{Cursor: cursor, End: end, Lease: time.Minute, Errors: map[string]int64{}}
	var all []lease.TargetOutcome
	for _, os := range outs {
		for _, o := range os {
			switch o.Kind {
			case lease.OutcomeSucceeded:
				cp.Succeeded++
			case lease.OutcomeFailed:
				cp.Failed++
				cp.Errors[o.Code]++
			case lease.OutcomeCapped:
				cp.Capped++
			}
		}
		all = append(all, os...)
	}
	cp.Outcomes = func() []lease.TargetOutcome { return all }
	return cp
}

// takenOver claims a 100-target chunk for a, stores its first 20, and has
// b take it over after a's lease expired.
func (f *fixture) takenOver() (id uint64, a, b *lease.Claim) {
	f.t.Helper()
	id = f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a = f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 20, outcomes(1, 20, lease.OutcomeSucceeded))); err != nil {
		f.t.Fatal(err)
	}
	f.expire(id)
	if b = f.claim("b"); b == nil || !b.Takeover {
		f.t.Fatalf("takeover: %+v", b)
	}
	return id, a, b
}

// A holder fenced off by a takeover sent targets its successor had not
// reached when a cancel ended the chunk: those count as sent, not
// canceled, whether the fenced holder reported before the close (stored
// aside) or after it (against what the close counted canceled), each
// once; the targets the successor sent again keep its outcome.
func TestAFencedHoldersSendsCountWhenItsSuccessorCancels(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()

	// a wakes: 21..38 succeeded and 39..40 failed since its last checkpoint.
	early := sends(lease.KeepLease, 40, outcomes(21, 38, lease.OutcomeSucceeded), outcomes(39, 40, lease.OutcomeFailed))
	seqBefore := a.CkptSeq
	res, err := f.s.Checkpoint(f.ctx(), a, early)
	if !errors.Is(err, lease.ErrLost) || !res.Fenced {
		t.Fatalf("the fenced holder's checkpoint: %+v %v, want ErrLost with its sends stored aside", res, err)
	}
	// Its answer lost: the retry stores nothing twice.
	retry := *a
	retry.CkptSeq = seqBefore
	if _, err := f.s.Checkpoint(f.ctx(), &retry, early); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the retry: %v, want ErrLost", err)
	}
	if n := f.rowsOf("fenced_sends", id); n != 1 {
		t.Fatalf("%d rows of sends stored aside, want 1", n)
	}
	if c := f.counts(id); c.succeeded != 20 || c.failed != 0 || c.canceled != 0 {
		t.Fatalf("stored aside counted already: %+v", c)
	}

	// b sends 21..30 again, then the cancel: 31..32 sent, 33..35 canceled in flight.
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 30, outcomes(21, 30, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	closing := sends(lease.Done, 100, outcomes(31, 32, lease.OutcomeSucceeded))
	closing.Canceled, closing.CancelRest = 3, true
	if _, err := f.s.Checkpoint(f.ctx(), b, closing); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	// 33..38 and 39..40 move out of canceled (68: 3 in flight and 65 never read).
	want := counts{succeeded: 20 + 10 + 2 + 6, failed: 2, canceled: 60, targeted: 100, status: "canceled", errors: 2}
	if c := f.counts(id); c != want {
		t.Fatalf("after the close: %+v, want %+v", c, want)
	}
	if n := f.rowsOf("fenced_sends", id); n != 0 {
		t.Fatalf("%d rows of sends stored aside after the close, want 0", n)
	}

	// a's last checkpoint, after the close: 41..45 it still had in flight,
	// and 31 that b counted already.
	final := sends(lease.Done, 100, outcomes(31, 31, lease.OutcomeSucceeded), outcomes(41, 45, lease.OutcomeSucceeded))
	final.CancelRest = true
	seqBefore = a.CkptSeq
	if res, err := f.s.Checkpoint(f.ctx(), a, final); err != nil || !res.Late {
		t.Fatalf("the fenced holder's late checkpoint: %+v %v", res, err)
	}
	want.succeeded, want.canceled = 43, 55
	if c := f.counts(id); c != want {
		t.Fatalf("after the late checkpoint: %+v, want %+v", c, want)
	}
	retry = *a
	retry.CkptSeq = seqBefore
	if _, err := f.s.Checkpoint(f.ctx(), &retry, final); err != nil {
		t.Fatalf("the late checkpoint again: %v", err)
	}
	if c := f.counts(id); c != want {
		t.Fatalf("after the late checkpoint again: %+v, want %+v (nothing twice)", c, want)
	}
}

// A successor that completes the chunk sent the fenced holder's targets
// again and counted them: what was stored aside counts for nothing, and
// Finish drops it.
func TestAFencedHoldersSendsCountForNothingWhenTheChunkCompletes(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 40, outcomes(21, 40, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the fenced holder's checkpoint: %v, want ErrLost", err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.Done, 100, outcomes(21, 100, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	// After the close, without a cancel, nothing of a's is taken.
	if res, err := f.s.Checkpoint(f.ctx(), a, sends(lease.Done, 100, outcomes(41, 45, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) || res.Fenced {
		t.Fatalf("a checkpoint after the completion: %+v %v, want ErrLost and nothing stored", res, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if c := f.counts(id); c.succeeded != 100 || c.canceled != 0 || c.targeted != 100 {
		t.Fatalf("final %+v, want 100 succeeded", c)
	}
	if n := f.rowsOf("fenced_sends", id); n != 0 {
		t.Fatalf("%d rows of sends stored aside after Finish, want 0", n)
	}
}

// Two holders fenced off in turn both sent the same target: it counts
// once; and a target the closing successor capped keeps its outcome.
func TestTwoFencedHoldersCountATargetOnce(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 30, outcomes(21, 30, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a: %v, want ErrLost", err)
	}
	f.expire(id)
	c := f.claim("c")
	if c == nil || !c.Takeover {
		t.Fatalf("second takeover: %+v", c)
	}
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 35, outcomes(21, 35, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("b: %v, want ErrLost", err)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	closing := sends(lease.Done, 100, outcomes(21, 24, lease.OutcomeCapped))
	closing.CancelRest = true
	if _, err := f.s.Checkpoint(f.ctx(), c, closing); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	// 25..35 are a's or b's (each once); 21..24 stay capped.
	if got := f.counts(id); got.succeeded != 20+11 || got.canceled != 100-31-4 || got.targeted != 100 {
		t.Fatalf("final %+v, want 31 succeeded, 4 capped and 65 canceled", got)
	}
}

// A cancel that closes a taken-over chunk itself (its holder stalled too)
// counts what a fenced holder stored aside before it.
func TestACancelsCloseCountsSendsStoredAside(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 30, outcomes(21, 30, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 40, outcomes(21, 38, lease.OutcomeSucceeded), outcomes(39, 40, lease.OutcomeFailed))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a: %v, want ErrLost", err)
	}
	f.expire(id)
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	want := counts{succeeded: 38, failed: 2, canceled: 60, targeted: 100, status: "canceled", errors: 2}
	if c := f.counts(id); c != want {
		t.Fatalf("final %+v, want %+v", c, want)
	}
	if n := f.rowsOf("fenced_sends", id); n != 0 {
		t.Fatalf("%d rows of sends stored aside after the close, want 0", n)
	}
}

// A cancel closing two chunks, one a takeover changed hands whose audience
// grew past its plan (its close counts none canceled), the other under a
// stalled holder: the fenced holder's sends raise targeted rather than
// take from the other chunk's canceled, so that chunk's late holder still
// finds its targets there.
func TestACancelsCloseMovesOutOfEachChunksOwnCanceled(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 20}, lease.Plan{Lo: 100, Hi: 200, Targets: 100})
	a := f.claim("a") // chunk 0
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 20, outcomes(1, 20, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	c := f.claim("c") // chunk 1
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.KeepLease, 110, outcomes(101, 110, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	f.expire(id)
	b := f.claim("b")
	if b == nil || b.Seq != 0 || !b.Takeover {
		t.Fatalf("takeover of chunk 0: %+v", b)
	}
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 25, outcomes(21, 25, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a: %v, want ErrLost", err)
	}
	f.expire(id) // b stalls too
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if got := f.counts(id); got.succeeded != 35 || got.canceled != 90 || got.targeted != 125 {
		t.Fatalf("after the cancel: %+v, want 35 succeeded, 90 canceled (chunk 1's) and targeted 125", got)
	}
	if res, err := f.s.Checkpoint(f.ctx(), c, sends(lease.Done, 200, outcomes(111, 120, lease.OutcomeSucceeded))); err != nil || !res.Late {
		t.Fatalf("c's late checkpoint: %+v %v", res, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if got := f.counts(id); got.succeeded != 45 || got.canceled != 80 || got.targeted != 125 {
		t.Fatalf("final %+v, want 45 succeeded, 80 canceled of 125", got)
	}
}

// A close of a chunk a takeover changed hands must list its outcomes:
// without them its own sends would look unsent, and a fenced holder's
// copies of them would count twice.
func TestAClosingCheckpointAfterATakeoverMustListItsOutcomes(t *testing.T) {
	f := newFixture(t)
	id, _, b := f.takenOver()
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.Checkpoint(f.ctx(), b, lease.Checkpoint{Cursor: 100, Succeeded: 5, End: lease.Done, CancelRest: true})
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("a close without its outcomes listed: %v, want an error", err)
	}
	if got := f.counts(id); got.succeeded != 20 {
		t.Fatalf("the refused close stored something: %+v", got)
	}
}
