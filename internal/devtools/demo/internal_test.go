package demo

import "testing"

func TestTokensBefore(t *testing.T) {
	t.Parallel()
	for _, m := range []int{1, 2, 3, 5} {
		var sum uint64
		for i := range 50 {
			if got := tokensBefore(i, m); got != sum {
				t.Fatalf("tokensBefore(%d, %d) = %d, want %d", i, m, got, sum)
			}
			sum += uint64(1 + i%m)
		}
	}
}
