package lease

import (
	"math"
	"slices"
	"testing"

	"pushfan/lease/codec"
	"pushfan/lease/outcome"
)

func TestWithoutCutsPointsOutOfRanges(t *testing.T) {
	for _, tc := range []struct {
		rs   []Range
		xs   []uint64
		want []Range
	}{
		{[]Range{{Lo: 1, Hi: 10}}, nil, []Range{{Lo: 1, Hi: 10}}},
		{[]Range{{Lo: 1, Hi: 10}}, []uint64{1}, []Range{{Lo: 2, Hi: 10}}},
		{[]Range{{Lo: 1, Hi: 10}}, []uint64{10}, []Range{{Lo: 1, Hi: 9}}},
		{[]Range{{Lo: 1, Hi: 10}}, []uint64{5, 5, 6}, []Range{{Lo: 1, Hi: 4}, {Lo: 7, Hi: 10}}},
		{[]Range{{Lo: 1, Hi: 3}, {Lo: 7, Hi: 9}}, []uint64{0, 2, 5, 7, 8, 9, 12}, []Range{{Lo: 1, Hi: 1}, {Lo: 3, Hi: 3}}},
		{[]Range{{Lo: 4, Hi: 4}}, []uint64{4}, []Range{}},
		{[]Range{{Lo: math.MaxUint64 - 1, Hi: math.MaxUint64}}, []uint64{math.MaxUint64}, []Range{{Lo: math.MaxUint64 - 1, Hi: math.MaxUint64 - 1}}},
	} {
		if got := without(tc.rs, tc.xs); !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
			t.Errorf("without(%v, %v) = %v, want %v", tc.rs, tc.xs, got, tc.want)
		}
	}
}

func TestUnsentAtCloseIsWhatNothingCovers(t *testing.T) {
	got := unsentAtClose(10, 100, []Range{{Lo: 15, Hi: 20}, {Lo: 30, Hi: 30}}, []TargetOutcome{{Cursor: 11}, {Cursor: 31}, {Cursor: 100}})
	want := []Range{{Lo: 12, Hi: 14}, {Lo: 21, Hi: 29}, {Lo: 32, Hi: 99}}
	if !slices.Equal(got, want) {
		t.Fatalf("unsent %v, want %v", got, want)
	}
	// At the top of the cursor space nothing wraps around to 0.
	const top = math.MaxUint64
	if got := unsentAtClose(top-3, top, []Range{{Lo: top - 1, Hi: top}}, nil); !slices.Equal(got, []Range{{Lo: top - 2, Hi: top - 2}}) {
		t.Fatalf("unsent at the top %v, want [%d]", got, uint64(top-2))
	}
	if got := unsentAtClose(top, top, nil, nil); len(got) != 0 {
		t.Fatalf("unsent past the top %v, want none", got)
	}
}

func TestFencedEncodingsRoundTrip(t *testing.T) {
	for _, rs := range [][]Range{{{Lo: 0, Hi: 0}}, {{Lo: 1, Hi: 5}}, {{Lo: 3, Hi: 4}, {Lo: 9, Hi: 9}, {Lo: 12, Hi: 1 << 40}}} {
		b, err := codec.EncodeSet(rs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.DecodeSet(b)
		if err != nil || !slices.Equal(got, rs) {
			t.Fatalf("set %v came back %v (%v)", rs, got, err)
		}
	}
	outs := []TargetOutcome{{Cursor: 3, Kind: OutcomeSucceeded}, {Cursor: 4, Kind: OutcomeCapped}, {Cursor: 7, Kind: OutcomeFailed, Code: "UNREGISTERED"}, {Cursor: 1 << 33, Kind: OutcomeSucceeded}}
	got, err := outcome.DecodeSent(outcome.EncodeSent(outs))
	want := []TargetOutcome{outs[0], outs[2], outs[3]} // capped ones are not sends
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("sends came back %v (%v), want %v", got, err, want)
	}
	if _, err := outcome.DecodeSent([]byte{1, 9, 'x'}); err == nil {
		t.Fatal("a truncated code decoded")
	}
}
