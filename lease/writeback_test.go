package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"pushfan/lease"
)

// A checkpoint's skipped write-backs are one of its counters: nothing when
// its Effects fail (the whole checkpoint rolls back), added once when it
// is stored, and not again by a replay after a lost commit answer.
func TestCheckpointWriteBackFailuresCountedOnce(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 100, Targets: 100})
	a := f.claim("a")
	before := *a
	cp := keep(50, 40)
	cp.Failed, cp.Errors = 10, map[string]int64{"UNREGISTERED": 10}
	refused := errors.New("on_dead refused")
	cp.Effects = func(context.Context, *sql.Tx) (int64, error) { return 0, refused }
	cp.WriteBackFailures = 3
	if _, err := f.s.Checkpoint(f.ctx(), a, cp); !errors.Is(err, refused) {
		t.Fatalf("checkpoint whose effects fail: %v, want the effects' error", err)
	}
	if n, c := f.writeBackFailures(id), f.counts(id); n != 0 || c.succeeded != 0 || c.failed != 0 || a.CkptSeq != 0 {
		t.Fatalf("after a failed checkpoint: writeback_failures %d, counts %+v, seq %d: want nothing stored", n, c, a.CkptSeq)
	}
	// Stored without the write-back of the 3 tokens that kept failing.
	cp.Effects = func(context.Context, *sql.Tx) (int64, error) { return 7, nil }
	if _, err := f.s.Checkpoint(f.ctx(), a, cp); err != nil {
		t.Fatal(err)
	}
	lost := before
	if res, err := f.s.Checkpoint(f.ctx(), &lost, cp); err != nil || !res.Replayed {
		t.Fatalf("retry after a lost answer: %+v %v, want a replay", res, err)
	}
	if n, c := f.writeBackFailures(id), f.counts(id); n != 3 || c.succeeded != 40 || c.failed != 10 {
		t.Fatalf("after the checkpoint and its replay: writeback_failures %d, counts %+v; want 3, 40 and 10", n, c)
	}
}

func (f *fixture) writeBackFailures(id uint64) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.QueryRowContext(f.ctx(), "SELECT writeback_failures FROM broadcasts WHERE id = ?", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
