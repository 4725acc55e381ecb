package broadcast

import (
	"context"
	"testing"

	"pushfan/fanout"
)

func TestSinkHoldsFailuresAboveTheCursor(t *testing.T) {
	s := newSink(7, true)
	for _, id := range []uint64{5, 1, 9, 3} {
		s.Failed(context.Background(), fanout.Failure{Target: fanout.Target{Cursor: id, TokenID: id + 100, UserID: id * 10}, Code: "UNREGISTERED", Dead: id != 3})
	}
	fs, ds := s.upTo(5)
	if len(fs) != 3 || len(ds) != 2 {
		t.Fatalf("up to 5: %d failures, %d dead", len(fs), len(ds))
	}
	for _, f := range fs {
		if f.TokenID > 105 || f.BroadcastID != 7 {
			t.Fatalf("failure %+v", f)
		}
	}
	fs, ds = s.upTo(100)
	if len(fs) != 1 || len(ds) != 1 || fs[0].TokenID != 109 {
		t.Fatalf("the rest: %d failures, %d dead", len(fs), len(ds))
	}
	if fs, ds := s.upTo(100); len(fs) != 0 || len(ds) != 0 {
		t.Fatal("upTo returned the same failures twice")
	}
	dry := newSink(8, false)
	dry.Failed(context.Background(), fanout.Failure{Target: fanout.Target{TokenID: 1}, Dead: true})
	if _, ds := dry.upTo(1); len(ds) != 0 {
		t.Fatal("a dry run without invalidate_on_dry_run must not invalidate")
	}
}
