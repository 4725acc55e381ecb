package lease_test

import (
	"errors"
	"testing"

	"pushfan/lease"
	"pushfan/lease/outcome"
)

// kept looks every cursor in [lo, hi] up in broadcast id's kept outcomes:
// its outcome name ("" when none is kept) and failure code.
func (f *fixture) kept(id, lo, hi uint64) map[uint64]string {
	f.t.Helper()
	got := map[uint64]string{}
	for x := lo; x <= hi; x++ {
		o, ok, err := outcome.LookupOne(f.ctx(), f.db, id, x)
		if err != nil {
			f.t.Fatal(err)
		}
		if ok {
			got[x] = o.Kind.String() + "/" + o.Code
		}
	}
	return got
}

// want builds the expected map of kept: name/code per cursor range.
func want(m map[uint64]string, lo, hi uint64, v string) {
	for x := lo; x <= hi; x++ {
		m[x] = v
	}
}

func equalMaps(a, b map[uint64]string) (uint64, bool) {
	for k, v := range a {
		if b[k] != v {
			return k, false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return k, false
		}
	}
	return 0, true
}

// A checkpoint keeps every target's outcome (accepted, failed with its
// code, capped, canceled) as one row in its own transaction, one byte a
// target for a dense run; its retry after a lost answer keeps nothing twice.
func TestACheckpointKeepsEveryTargetsOutcomeOnce(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	c := f.claim("a")
	cp := sends(lease.KeepLease, 60, outcomes(1, 50, lease.OutcomeSucceeded), outcomes(51, 52, lease.OutcomeFailed),
		outcomes(53, 53, lease.OutcomeCapped), outcomes(54, 60, lease.OutcomeCanceled))
	cp.Canceled = 7
	before := *c
	if _, err := f.s.Checkpoint(f.ctx(), c, cp); err != nil {
		t.Fatal(err)
	}
	retry := before
	if res, err := f.s.Checkpoint(f.ctx(), &retry, cp); err != nil || !res.Replayed {
		t.Fatalf("the retry: %+v %v, want a replay", res, err)
	}
	var rows, n, bytes int64
	if err := f.db.QueryRowContext(f.ctx(), "SELECT COUNT(*), COALESCE(SUM(n), 0), COALESCE(SUM(LENGTH(outcomes)), 0) FROM target_outcomes WHERE broadcast_id = ?", id).
		Scan(&rows, &n, &bytes); err != nil {
		t.Fatal(err)
	}
	// 60 targets: a byte each, and the two failures' codes (1 + 12 bytes).
	if rows != 1 || n != 60 || bytes != 60+2*13 {
		t.Fatalf("kept %d rows listing %d targets in %d bytes, want 1, 60, %d", rows, n, bytes, 60+2*13)
	}
	exp := map[uint64]string{}
	want(exp, 1, 50, "accepted/")
	want(exp, 51, 52, "failed/UNREGISTERED")
	want(exp, 53, 53, "capped/")
	want(exp, 54, 60, "canceled/")
	if x, ok := equalMaps(f.kept(id, 0, 100), exp); !ok {
		t.Fatalf("cursor %d: kept %q, want %q", x, f.kept(id, x, x)[x], exp[x])
	}
}

// A checkpoint whose targets span more than MaxSpan cursors is kept as
// several rows, each found by the bounded lookup.
func TestOutcomesSpreadWideAreSplitIntoBoundedRows(t *testing.T) {
	f := newFixture(t)
	const hi = 5 * outcome.MaxSpan
	id := f.broadcast(lease.Plan{Lo: 0, Hi: hi, Targets: 5})
	c := f.claim("a")
	var outs []lease.TargetOutcome
	for i := uint64(1); i <= 5; i++ {
		outs = append(outs, lease.TargetOutcome{Cursor: i * (outcome.MaxSpan - 1), Kind: lease.OutcomeSucceeded})
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.Done, hi, outs)); err != nil {
		t.Fatal(err)
	}
	var rows, wide int64
	if err := f.db.QueryRowContext(f.ctx(), "SELECT COUNT(*), COALESCE(SUM(hi - lo > ?), 0) FROM target_outcomes WHERE broadcast_id = ?", outcome.MaxSpan, id).Scan(&rows, &wide); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || wide != 0 {
		t.Fatalf("%d rows, %d wider than MaxSpan; want 3, 0", rows, wide)
	}
	for _, o := range outs {
		if got, ok, err := outcome.LookupOne(f.ctx(), f.db, id, o.Cursor); err != nil || !ok || got.Kind != lease.OutcomeSucceeded {
			t.Fatalf("cursor %d: %+v %v %v", o.Cursor, got, ok, err)
		}
	}
	if _, ok, _ := outcome.LookupOne(f.ctx(), f.db, id, outcome.MaxSpan); ok {
		t.Fatal("a cursor no row lists was found")
	}
}

// After a takeover and a cancel, the kept outcomes are what was sent, as
// the counters say: a fenced holder's sends the successor never reached
// are theirs (before and after the close), the successor's sends are
// kept once, and nothing is kept for targets nobody read.
func TestOutcomesAfterATakeoverAreWhatWasSent(t *testing.T) {
	f := newFixture(t)
	id, a, b := f.takenOver()
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 40, outcomes(21, 38, lease.OutcomeSucceeded), outcomes(39, 40, lease.OutcomeFailed))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the fenced holder: %v, want ErrLost", err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 30, outcomes(21, 30, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	closing := sends(lease.Done, 100, outcomes(31, 32, lease.OutcomeSucceeded), outcomes(33, 35, lease.OutcomeCanceled))
	closing.Canceled, closing.CancelRest = 3, true
	if _, err := f.s.Checkpoint(f.ctx(), b, closing); err != nil {
		t.Fatal(err)
	}
	final := sends(lease.Done, 100, outcomes(31, 31, lease.OutcomeSucceeded), outcomes(41, 45, lease.OutcomeSucceeded))
	final.CancelRest = true
	if res, err := f.s.Checkpoint(f.ctx(), a, final); err != nil || !res.Late {
		t.Fatalf("the fenced holder's late checkpoint: %+v %v", res, err)
	}
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	exp := map[uint64]string{}
	want(exp, 1, 38, "accepted/") // 33..35: b canceled them in flight, a had sent them
	want(exp, 39, 40, "failed/UNREGISTERED")
	want(exp, 41, 45, "accepted/")
	got := f.kept(id, 0, 100)
	if x, ok := equalMaps(got, exp); !ok {
		t.Fatalf("cursor %d: kept %q, want %q", x, got[x], exp[x])
	}
	// The counters agree target by target.
	c := f.counts(id)
	var acc, fail int64
	for _, v := range got {
		switch v {
		case "accepted/":
			acc++
		case "failed/UNREGISTERED":
			fail++
		}
	}
	if acc != c.succeeded || fail != c.failed {
		t.Fatalf("kept %d accepted and %d failed, counted %+v", acc, fail, c)
	}
}

// The blob round-trips every kind, and a dense run costs a byte a target.
func TestOutcomesBlobRoundTrips(t *testing.T) {
	outs := []lease.TargetOutcome{
		{Cursor: 7, Kind: lease.OutcomeSucceeded}, {Cursor: 8, Kind: lease.OutcomeFailed, Code: "QUOTA_EXCEEDED"},
		{Cursor: 9, Kind: lease.OutcomeCapped}, {Cursor: 300, Kind: lease.OutcomeCanceled},
		{Cursor: 301, Kind: outcome.Deferred}, {Cursor: 302, Kind: outcome.Stale}, {Cursor: 1 << 40, Kind: outcome.Excluded},
	}
	b := outcome.Encode(7, outs)
	var back []lease.TargetOutcome
	if err := outcome.Decode(7, b, func(o lease.TargetOutcome) bool { back = append(back, o); return true }); err != nil {
		t.Fatal(err)
	}
	if len(back) != len(outs) {
		t.Fatalf("%d back, want %d", len(back), len(outs))
	}
	for i := range outs {
		if back[i] != outs[i] {
			t.Fatalf("target %d: %+v, want %+v", i, back[i], outs[i])
		}
	}
	dense := outcomes(1000, 1999, lease.OutcomeSucceeded)
	if n := len(outcome.Encode(1000, dense)); n != 1000 {
		t.Fatalf("1,000 dense targets in %d bytes, want 1,000", n)
	}
	if err := outcome.Decode(0, []byte{0xff}, func(lease.TargetOutcome) bool { return true }); err == nil {
		t.Fatal("a truncated blob decoded")
	}
}

// A checkpoint of sparse targets (each farther than MaxSpan from the
// next: a local-time chunk over a large id space) keeps a row each, in
// statements within MySQL's placeholder limit.
func TestSparseOutcomesNeedManyRowsAndStillFit(t *testing.T) {
	f := newFixture(t)
	const n = 2500
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 1 << 40, Targets: n})
	c := f.claim("a")
	var outs []lease.TargetOutcome
	for i := uint64(1); i <= n; i++ {
		outs = append(outs, lease.TargetOutcome{Cursor: i << 17, Kind: lease.OutcomeSucceeded})
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.KeepLease, 1<<17, outs)); err != nil {
		t.Fatal(err)
	}
	if rows := f.rowsOf("target_outcomes", id); rows != n {
		t.Fatalf("%d rows, want %d", rows, n)
	}
	for _, i := range []uint64{1, 1000, n} {
		if o, ok, err := outcome.LookupOne(f.ctx(), f.db, id, i<<17); err != nil || !ok || o.Kind != lease.OutcomeSucceeded {
			t.Fatalf("target %d: %+v %v %v", i<<17, o, ok, err)
		}
	}
}
