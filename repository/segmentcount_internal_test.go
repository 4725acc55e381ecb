package repository

import "testing"

// The estimate's ranges: the whole span when it is no bigger than the
// sample, else EstimateRanges disjoint ranges of EstimateRangeIDs ids,
// one inside each EstimateRanges-th of the span.
func TestEstimateRangesSpreadEvenly(t *testing.T) {
	r, read, span := estimateRanges(5, 99_999)
	if len(r) != 1 || r[0] != [2]int64{5, 99_999} || read != span || span != 99_995 {
		t.Fatalf("small span: %v, read %d of %d", r, read, span)
	}
	for _, c := range [][2]int64{{1, 100_001}, {1, 10_000_000}, {7_000_000, 93_123_457}} {
		lo, hi := c[0], c[1]
		r, read, span := estimateRanges(lo, hi)
		if len(r) != EstimateRanges || read != EstimateRanges*EstimateRangeIDs || span != hi-lo+1 {
			t.Fatalf("%d..%d: %d ranges, read %d of %d", lo, hi, len(r), read, span)
		}
		for i, x := range r {
			stratum := [2]int64{lo + span*int64(i)/EstimateRanges, lo + span*int64(i+1)/EstimateRanges - 1}
			if x[1]-x[0]+1 != EstimateRangeIDs || x[0] < stratum[0] || x[1] > stratum[1] {
				t.Fatalf("%d..%d: range %d is %v, outside its twentieth %v", lo, hi, i, x, stratum)
			}
		}
	}
}
