package quota

import (
	"math"
	"strings"
	"testing"
)

func TestSplitIsMaxMinFair(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name   string
		limit  float64
		demand []float64
		want   []float64
	}{
		{"one", 9900, []float64{inf}, []float64{9900}},
		{"equal", 9000, []float64{inf, inf, inf}, []float64{3000, 3000, 3000}},
		{"a paced member takes its pace", 9000, []float64{inf, 1000, inf}, []float64{4000, 1000, 4000}},
		{"paced under the fair share each", 9000, []float64{500, 200}, []float64{500, 200}},
		{"a pace over the fair share is cut to it", 9000, []float64{6000, inf, 6000}, []float64{3000, 3000, 3000}},
		{"what one leaves goes to the rest", 9000, []float64{1000, 5000, inf}, []float64{1000, 4000, 4000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := split(tc.limit, tc.demand)
			var sum float64
			for i := range got {
				sum += got[i]
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("split(%v, %v) = %v, want %v", tc.limit, tc.demand, got, tc.want)
				}
			}
			if sum > tc.limit+1e-9 {
				t.Fatalf("split(%v, %v) hands out %v, over the limit", tc.limit, tc.demand, sum)
			}
		})
	}
}

// Two processes under one (pinned, or wrongly shared) instance id are two
// members of the budget.
func TestMemberIsUniquePerProcess(t *testing.T) {
	a, b := Member("pod-0"), Member("pod-0")
	if a == b || !strings.HasPrefix(a, "pod-0/") {
		t.Fatalf("Member(pod-0) = %q and %q: want two names starting pod-0/", a, b)
	}
	if long := Member(strings.Repeat("x", 64)); len(long) > 64 {
		t.Fatalf("Member of a 64-character owner is %d characters, over the column's 64", len(long))
	}
}
