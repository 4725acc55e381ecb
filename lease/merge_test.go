package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/lease/outcome"
	readers "pushfan/outcomes"
)

// denseApps is outcomes.Apps over a dense audience: cursor x is token x
// of user x + 1000, and every cursor of a range is in the audience.
type denseApps struct{}

func (denseApps) UserTokens(_ context.Context, user uint64) ([]readers.AppToken, error) {
	return []readers.AppToken{{ID: user - 1000, Platform: "android"}}, nil
}

func (denseApps) TokenUsers(_ context.Context, _ string, ids []uint64) (map[uint64]uint64, error) {
	m := map[uint64]uint64{}
	for _, id := range ids {
		m[id] = id + 1000
	}
	return m, nil
}

func (denseApps) AudienceRange(_ context.Context, _, after, upto uint64, limit int) ([]uint64, error) {
	var out []uint64
	for x := after + 1; x <= upto && len(out) < limit; x++ {
		out = append(out, x)
	}
	return out, nil
}

// twin is a broadcast that keeps, unmerged, a copy of every row another
// broadcast's checkpoints wrote: the answer the merged broadcast must
// give.
func (f *fixture) twin() uint64 {
	f.t.Helper()
	res, err := f.db.ExecContext(f.ctx(), `INSERT INTO broadcasts (message, audience, status) VALUES ('{}', '{"all":true}', 'canceled')`)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return uint64(id)
}

// copyRows copies broadcast from's rows of table to broadcast to.
func (f *fixture) copyRows(table string, from, to uint64) {
	f.t.Helper()
	cols := "seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at"
	if table == "canceled_rests" {
		cols = "seq, lo_id, after_id, hi_id, rest, target_ids, created_at"
	}
	if _, err := f.db.ExecContext(f.ctx(), "INSERT INTO "+table+" (broadcast_id, "+cols+") SELECT ?, "+cols+" FROM "+table+" WHERE broadcast_id = ?", to, from); err != nil {
		f.t.Fatal(err)
	}
}

// keepAs keeps outs on the twin as holder (epoch, ckpt) of chunk 0 would.
func (f *fixture) keepAs(id, epoch, ckpt uint64, outs []lease.TargetOutcome) {
	f.t.Helper()
	if err := outcome.Keep(f.ctx(), f.db, outcome.Holder{BroadcastID: id, Epoch: epoch, CkptSeq: ckpt}, outs); err != nil {
		f.t.Fatal(err)
	}
}

// answers is every way a reader answers for broadcast id over cursors
// 0..hi: the look-up of each cursor, a user's deliveries (its device's
// outcome), and the export's lines.
func (f *fixture) answers(id, hi uint64) []string {
	f.t.Helper()
	r := &readers.Reader{DB: f.db, Apps: denseApps{}}
	var out []string
	for x := uint64(0); x <= hi; x++ {
		o, ok, err := outcome.LookupOne(f.ctx(), f.db, id, x)
		if err != nil {
			f.t.Fatal(err)
		}
		if ok {
			out = append(out, fmt.Sprintf("lookup %d %s/%s", x, o.Kind, o.Code))
		}
		page, err := r.Deliveries(f.ctx(), x+1000, 100, 0)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if d.BroadcastID == id {
				for _, dev := range d.Devices {
					out = append(out, fmt.Sprintf("device %d %s/%s", dev.TokenID, dev.Outcome, dev.Code))
				}
			}
		}
	}
	for _, k := range []outcome.Kind{0, outcome.Succeeded, outcome.Failed, outcome.Canceled, outcome.Deferred, outcome.Stale} {
		if err := r.Export(f.ctx(), id, k, func(l readers.Line) error {
			out = append(out, fmt.Sprintf("export %v %d %d %s/%s", k, l.TokenID, l.UserID, l.Outcome, l.Code))
			return nil
		}); err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}

// sameAnswers fails unless broadcasts id and twin answer alike, and
// returns id's answers.
func (f *fixture) sameAnswers(when string, id, twin, hi uint64) []string {
	f.t.Helper()
	got, exp := f.answers(id, hi), f.answers(twin, hi)
	if !slices.Equal(got, exp) {
		for i := range max(len(got), len(exp)) {
			var g, e string
			if i < len(got) {
				g = got[i]
			}
			if i < len(exp) {
				e = exp[i]
			}
			if g != e {
				f.t.Fatalf("%s: answer %d of %d: merged %q, unmerged %q", when, i, len(exp), g, e)
			}
		}
	}
	return got
}

func mixed(outs ...[]lease.TargetOutcome) []lease.TargetOutcome {
	var all []lease.TargetOutcome
	for _, o := range outs {
		all = append(all, o...)
	}
	return all
}

func one(x uint64, kind lease.OutcomeKind, code string) []lease.TargetOutcome {
	return []lease.TargetOutcome{{Cursor: x, Kind: kind, Code: code}}
}

// A chunk's closing checkpoint folds its rows into a row per claim whose
// listing won, and every reader (the look-up, a user's deliveries, the
// export of each kind) answers target by target as the unmerged rows do:
// three holders (two fenced off by takeovers), failures with their codes,
// capped, canceled, deferred and stale listings, a cancel's rest, then
// fenced holders reporting after the merge (one of an epoch between two
// winners), and replays of merged checkpoints.
func TestAMergedChunkAnswersAsItsCheckpoints(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	tw := f.twin()
	a := f.claim("a")
	ckpts := []lease.Checkpoint{
		sends(lease.KeepLease, 13, outcomes(1, 10, lease.OutcomeSucceeded), one(11, lease.OutcomeFailed, "UNREGISTERED"),
			one(12, lease.OutcomeFailed, "INVALID_ARGUMENT"), outcomes(13, 13, lease.OutcomeCapped)),
		sends(lease.KeepLease, 20, outcomes(14, 18, lease.OutcomeSucceeded), one(19, lease.OutcomeFailed, "QUOTA_EXCEEDED"), outcomes(20, 20, outcome.Stale)),
	}
	for _, cp := range ckpts {
		if _, err := f.s.Checkpoint(f.ctx(), a, cp); err != nil {
			t.Fatal(err)
		}
	}
	f.expire(id)
	b := f.claim("b")
	// a, fenced off, stores what it had in flight aside (and as its rows).
	if _, err := f.s.Checkpoint(f.ctx(), a, sends(lease.KeepLease, 35, outcomes(21, 30, lease.OutcomeSucceeded),
		one(31, lease.OutcomeFailed, "INTERNAL"), outcomes(32, 35, lease.OutcomeSucceeded))); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("fenced a: %v, want ErrLost", err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), b, sends(lease.KeepLease, 28, outcomes(21, 25, lease.OutcomeSucceeded),
		one(26, lease.OutcomeFailed, "UNAVAILABLE"), outcomes(27, 27, lease.OutcomeCapped), outcomes(28, 28, lease.OutcomeCanceled))); err != nil {
		t.Fatal(err)
	}
	f.expire(id)
	c := f.claim("c")
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.KeepLease, 30, outcomes(29, 29, lease.OutcomeSucceeded), outcomes(30, 30, outcome.Deferred))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	// Up to here the twin holds the same rows; the closing checkpoint's
	// own it keeps unmerged.
	f.copyRows("target_outcomes", id, tw)
	closing := sends(lease.Done, 100, outcomes(31, 33, lease.OutcomeCanceled), outcomes(34, 34, outcome.Stale), outcomes(36, 37, lease.OutcomeSucceeded))
	closing.Canceled, closing.CancelRest = 3, true
	f.keepAs(tw, c.Epoch, c.CkptSeq+1, closing.Outcomes())
	before := *c
	rowsBefore := f.rowsOf("target_outcomes", id) + 1
	if _, err := f.s.Checkpoint(f.ctx(), c, closing); err != nil {
		t.Fatal(err)
	}
	if n := f.rowsOf("canceled_rests", id); n != 1 {
		t.Fatalf("%d canceled_rests rows, want the close's one", n)
	}
	f.copyRows("canceled_rests", id, tw)
	// Winners of three claims: a row each (a dense chunk's fit one).
	var rows int
	var keys []string
	r, err := f.db.QueryContext(f.ctx(), "SELECT CONCAT(epoch, '/', ckpt_seq, '/', part) FROM target_outcomes WHERE broadcast_id = ? ORDER BY epoch, ckpt_seq, part", id)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var k string
		if err := r.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		rows++
	}
	r.Close()
	// a's highest checkpoint is its fenced one (3), b's 3, c's the closing 5.
	if want := fmt.Sprintf("%d/3/0 %d/3/0 %d/5/0", a.Epoch, b.Epoch, c.Epoch); strings.Join(keys, " ") != want {
		t.Fatalf("merged %d rows into %q, want %q", rowsBefore, strings.Join(keys, " "), want)
	}
	got := f.sameAnswers("merged", id, tw, 101)
	// Spot checks of the rule itself: precedence, then the later claim.
	for _, w := range []string{"lookup 11 failed/UNREGISTERED", "lookup 26 failed/UNAVAILABLE", "lookup 27 accepted/", "lookup 28 accepted/",
		"lookup 30 accepted/", "lookup 31 failed/INTERNAL", "lookup 34 accepted/", "lookup 13 capped/", "lookup 20 stale/", "lookup 36 accepted/"} {
		if !slices.Contains(got, w) {
			t.Fatalf("no %q among %q", w, got)
		}
	}

	// The closing holder's retry after a lost answer is a replay: nothing
	// written.
	if res, err := f.s.Checkpoint(f.ctx(), &before, closing); err != nil || !res.Replayed {
		t.Fatalf("the closing retry: %+v %v, want a replay", res, err)
	}
	if n := f.rowsOf("target_outcomes", id); n != 3 {
		t.Fatalf("%d rows after the replay, want 3", n)
	}

	// b, fenced between a and c, reports after the merge: target 21 (a's
	// accepted at epoch 1 won; b's later claim at epoch 2 beats it), 29
	// (c's accepted at epoch 3 keeps it), 38 (new).
	lateB := sends(lease.KeepLease, 40, one(21, lease.OutcomeFailed, "B_LATE"), one(29, lease.OutcomeFailed, "B_LATE"), outcomes(38, 38, lease.OutcomeSucceeded))
	seqB := b.CkptSeq + 1
	if res, err := f.s.Checkpoint(f.ctx(), b, lateB); err != nil || !res.Late {
		t.Fatalf("b after the merge: %+v %v", res, err)
	}
	f.keepAs(tw, b.Epoch, seqB, lateB.Outcomes())
	// a (the oldest claim) reports last: 22 and 36 equal in precedence to
	// later claims' (they keep theirs), 14 its own earlier listing (its
	// later checkpoint wins), 33 sent (beats c's canceled), 39 new.
	lateA := sends(lease.Done, 100, one(14, lease.OutcomeFailed, "A_LATE"), one(22, lease.OutcomeFailed, "A_LATE"), one(36, lease.OutcomeFailed, "A_LATE"), outcomes(33, 33, lease.OutcomeSucceeded), outcomes(39, 39, lease.OutcomeCapped))
	lateA.CancelRest = true
	seqA := a.CkptSeq + 1
	if res, err := f.s.Checkpoint(f.ctx(), a, lateA); err != nil || !res.Late {
		t.Fatalf("a after the merge: %+v %v", res, err)
	}
	f.keepAs(tw, a.Epoch, seqA, lateA.Outcomes())
	got = f.sameAnswers("late holders after the merge", id, tw, 101)
	for _, w := range []string{"lookup 21 failed/B_LATE", "lookup 29 accepted/", "lookup 14 failed/A_LATE", "lookup 22 accepted/", "lookup 36 accepted/", "lookup 33 accepted/", "lookup 39 capped/", "lookup 38 accepted/"} {
		if !slices.Contains(got, w) {
			t.Fatalf("no %q among %q", w, got)
		}
	}

	// Replays of checkpoints whose rows the merge deleted (INSERT IGNORE
	// finds no key now): the twin ignores them, the merged broadcast
	// keeps them again, and both answer alike.
	f.keepAs(id, a.Epoch, 1, ckpts[0].Outcomes())
	f.keepAs(tw, a.Epoch, 1, ckpts[0].Outcomes())
	f.keepAs(id, b.Epoch, 3, mixed(outcomes(21, 25, lease.OutcomeSucceeded), one(26, lease.OutcomeFailed, "UNAVAILABLE"), outcomes(27, 27, lease.OutcomeCapped), outcomes(28, 28, lease.OutcomeCanceled)))
	f.keepAs(id, c.Epoch, 5, closing.Outcomes())
	f.sameAnswers("replays after the merge", id, tw, 101)
	if ok, err := f.s.Finish(f.ctx(), id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
}

// A merge is all or nothing: rolled back (a kill -9 before the commit),
// the rows are as they were; a chunk of one row is left alone, and so are
// the plan's rows (no chunk's).
func TestAMergeIsAllOrNothing(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 1000, Targets: 1000})
	c := f.claim("a")
	for x := uint64(100); x <= 900; x += 100 {
		if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.KeepLease, x, outcomes(x-99, x, lease.OutcomeSucceeded))); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := f.db.BeginTx(f.ctx(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if read, wrote, err := outcome.Merge(f.ctx(), tx, id, 0); err != nil || read != 9 || wrote != 1 {
		t.Fatalf("merge: read %d, wrote %d, %v; want 9, 1", read, wrote, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := f.rowsOf("target_outcomes", id); n != 9 {
		t.Fatalf("%d rows after a rolled-back merge, want 9", n)
	}
	// The plan's rows (excluded and deferred targets, under PlanSeq) are
	// no chunk's: the merge leaves them.
	plan := []lease.TargetOutcome{{Cursor: 5000, Kind: outcome.Excluded}, {Cursor: 6000, Kind: outcome.Deferred}}
	if err := outcome.Keep(f.ctx(), f.db, outcome.Holder{BroadcastID: id, Seq: outcome.PlanSeq, CkptSeq: 7000}, plan); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.Done, 1000, outcomes(901, 1000, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	var rows, n, bytes int
	if err := f.db.QueryRowContext(f.ctx(), "SELECT COUNT(*), SUM(n), SUM(LENGTH(outcomes)) FROM target_outcomes WHERE broadcast_id = ? AND seq = 0", id).Scan(&rows, &n, &bytes); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || n != 1000 || bytes != 1000 {
		t.Fatalf("merged into %d rows of %d targets in %d bytes, want 1, 1000, 1000", rows, n, bytes)
	}
	if read, wrote, err := outcome.Merge(f.ctx(), f.db, id, 0); err != nil || read != 1 || wrote != 0 {
		t.Fatalf("merging one row: read %d, wrote %d, %v", read, wrote, err)
	}
	for _, o := range plan {
		if got, ok, err := outcome.LookupOne(f.ctx(), f.db, id, o.Cursor); err != nil || !ok || got.Kind != o.Kind {
			t.Fatalf("the plan's %d: %+v %v %v", o.Cursor, got, ok, err)
		}
	}
}

// Merged rows keep the look-up's bound (hi - lo <= MaxSpan) and stay
// under MergedBlobMax bytes: a chunk of 20,000 dense targets with
// failures is cut into rows, and every target is found.
func TestMergedRowsKeepTheirBounds(t *testing.T) {
	var ts []outcome.Target
	for x := uint64(1); x <= 20000; x++ {
		o := outcome.Target{Cursor: x * 3, Kind: outcome.Succeeded}
		if x%50 == 0 {
			o.Kind, o.Code = outcome.Failed, "UNREGISTERED"
		}
		ts = append(ts, o)
	}
	parts := outcome.Split(ts, outcome.MergedBlobMax)
	total := 0
	for _, p := range parts {
		b := outcome.Encode(p[0].Cursor, p)
		if len(b) > outcome.MergedBlobMax || p[len(p)-1].Cursor-p[0].Cursor > outcome.MaxSpan {
			t.Fatalf("a part of %d bytes spanning %d", len(b), p[len(p)-1].Cursor-p[0].Cursor)
		}
		total += len(p)
	}
	if total != len(ts) || len(parts) != 4 {
		t.Fatalf("%d targets in %d parts, want %d in 4", total, len(parts), len(ts))
	}
}

// A store that keeps no outcomes (PUSHFAN_OUTCOME_RETENTION=0) writes no
// target_outcomes row, and counts as ever.
func TestAStoreThatKeepsNoOutcomesWritesNone(t *testing.T) {
	f := newFixture(t)
	f.s.KeepNoOutcomes()
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	c := f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.KeepLease, 50, outcomes(1, 49, lease.OutcomeSucceeded), outcomes(50, 50, lease.OutcomeFailed))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Checkpoint(f.ctx(), c, sends(lease.Done, 100, outcomes(51, 100, lease.OutcomeSucceeded))); err != nil {
		t.Fatal(err)
	}
	if n := f.rowsOf("target_outcomes", id); n != 0 {
		t.Fatalf("%d rows kept, want none", n)
	}
	if got := f.counts(id); got.succeeded != 99 || got.failed != 1 {
		t.Fatalf("counted %+v, want 99 succeeded and 1 failed", got)
	}
}

// What a merge costs the closing checkpoint's transaction: a chunk of
// 10,000 targets kept by 70 checkpoints (the default pace), merged and
// rolled back each time.
func BenchmarkMergeAChunk(b *testing.B) {
	db := testdb.New(b).SQL.DB
	ctx := b.Context()
	for ckpt := uint64(1); ckpt <= 70; ckpt++ {
		var outs []lease.TargetOutcome
		for x := (ckpt-1)*143 + 1; x <= min(ckpt*143, 10000); x++ {
			outs = append(outs, lease.TargetOutcome{Cursor: x, Kind: lease.OutcomeSucceeded})
		}
		if err := outcome.Keep(ctx, db, outcome.Holder{BroadcastID: 1, Epoch: 1, CkptSeq: ckpt}, outs); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if read, wrote, err := outcome.Merge(ctx, tx, 1, 0); err != nil || read != 70 || wrote != 2 {
			b.Fatalf("read %d, wrote %d: %v", read, wrote, err)
		}
		if err := tx.Rollback(); err != nil {
			b.Fatal(err)
		}
	}
}
