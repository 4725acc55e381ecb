package codec

import (
	"slices"
	"testing"
)

// Ranges and target lists come back as they went in, in a few bytes a
// range or a target for dense ids, and what breaks their rules (out of
// order, overlapping, not above the cursor) is refused on the way in.
func TestRangesAndIDsRoundTrip(t *testing.T) {
	rs := []Range{{Lo: 11, Hi: 11}, {Lo: 13, Hi: 40}, {Lo: 1000, Hi: 1_000_000}}
	b, err := EncodeRanges(10, rs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRanges(10, b)
	if err != nil || !slices.Equal(got, rs) {
		t.Fatalf("ranges: got %v (%v), want %v", got, err, rs)
	}
	if len(b) > 1+len(rs)*6 {
		t.Fatalf("%d bytes for %d ranges", len(b), len(rs))
	}
	for _, bad := range [][]Range{{{Lo: 10, Hi: 12}}, {{Lo: 20, Hi: 30}, {Lo: 25, Hi: 40}}, {{Lo: 30, Hi: 20}}} {
		if _, err := EncodeRanges(10, bad); err == nil {
			t.Errorf("EncodeRanges(10, %v): want an error", bad)
		}
	}
	ids := []uint64{101, 102, 103, 250, 100_000}
	b, err = EncodeIDs(100, ids)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs, err := DecodeIDs(100, b)
	if err != nil || !slices.Equal(gotIDs, ids) {
		t.Fatalf("ids: got %v (%v), want %v", gotIDs, err, ids)
	}
	if _, err := EncodeIDs(100, []uint64{100}); err == nil {
		t.Error("EncodeIDs: an id not above the lower bound: want an error")
	}
}

// A stored value that is not one of these encodings is an error, never a
// panic or a silently wrong set.
func TestCorruptEncodingsAreErrors(t *testing.T) {
	for _, b := range [][]byte{{0xff}, {2, 1}, {1, 1, 1, 7}, {1, 0, 1}} {
		if _, err := DecodeRanges(10, b); err == nil {
			t.Errorf("DecodeRanges(%v): want an error", b)
		}
	}
	for _, b := range [][]byte{{0}, {0xff}} {
		if _, err := DecodeIDs(10, b); err == nil {
			t.Errorf("DecodeIDs(%v): want an error", b)
		}
	}
}
