package message

import (
	"math"
	"testing"
)

// The pick follows the weights whatever the user ids look like: in order,
// odd only (auto_increment_increment = 2), or strided by 128; and
// neighbouring users do not simply alternate.
func TestPickVariantFollowsTheWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		stride  uint64
	}{
		{"50/50, consecutive ids", []int{50, 50}, 1},
		{"90/10, odd ids", []int{90, 10}, 2},
		{"4 equal, odd ids", []int{1, 1, 1, 1}, 2},
		{"30/70, ids 128 apart", []int{30, 70}, 128},
	} {
		const n = 40000
		counts := make([]int, len(tc.weights))
		changes, prev := 0, -1
		for i := uint64(0); i < n; i++ {
			v := PickVariant(42, 1+i*tc.stride, tc.weights)
			counts[v]++
			if v != prev {
				changes++
			}
			prev = v
		}
		total := 0
		for _, w := range tc.weights {
			total += w
		}
		for i, w := range tc.weights {
			want := float64(n) * float64(w) / float64(total)
			if math.Abs(float64(counts[i])-want) > 4*math.Sqrt(want) {
				t.Errorf("%s: variant %d got %d users, want about %.0f", tc.name, i, counts[i], want)
			}
		}
		// A fair split changes variant between neighbours about 1 - Σp² of
		// the time; strict alternation or long runs are far from it.
		var same float64
		for _, w := range tc.weights {
			p := float64(w) / float64(total)
			same += p * p
		}
		if want := float64(n) * (1 - same); math.Abs(float64(changes)-want) > 0.05*float64(n) {
			t.Errorf("%s: %d changes of variant between neighbours, want about %.0f", tc.name, changes, want)
		}
	}
	// The same user of the same broadcast always gets the same variant.
	first := make([]int, 1000)
	for u := range first {
		first[u] = PickVariant(7, uint64(u), []int{1, 2, 3})
	}
	for u := range first {
		if got := PickVariant(7, uint64(u), []int{1, 2, 3}); got != first[u] {
			t.Fatalf("user %d got variant %d, then %d", u, first[u], got)
		}
	}
}
