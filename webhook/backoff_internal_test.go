package webhook

import (
	"math/rand/v2"
	"testing"
	"time"
)

// fixed is a rand.Source that always draws itself: rand.Float64 (the low
// 53 bits over 1<<53) is then 0 for 0, exactly 0.5 for 1<<52, and just
// under 1 for the largest uint64.
type fixed uint64

func (f fixed) Uint64() uint64 { return uint64(f) }

// The nth wait is the nth step of the schedule, the last step past its
// end, each within ±20 %: exactly the step at the middle draw, 80 % of it
// at the lowest, just under 120 % at the highest.
func TestBackoffFollowsTheSchedule(t *testing.T) {
	schedule := []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second}
	step := func(n int) time.Duration { return schedule[min(n, len(schedule))-1] }
	mid, low, high := rand.New(fixed(1<<52)), rand.New(fixed(0)), rand.New(fixed(^uint64(0)))
	for n := 1; n <= 8; n++ {
		d := step(n)
		if got := backoff(n, schedule, mid); got != d {
			t.Errorf("backoff(%d) at the middle draw = %v, want %v exactly", n, got, d)
		}
		// 0.8 and 1.2 are not exact in binary: a nanosecond either way.
		if got, want := backoff(n, schedule, low), d*4/5; got < want-time.Nanosecond || got > want {
			t.Errorf("backoff(%d) at the lowest draw = %v, want %v (-20 %%)", n, got, want)
		}
		if got, want := backoff(n, schedule, high), d*6/5; got < want-time.Microsecond || got > want {
			t.Errorf("backoff(%d) at the highest draw = %v, want just under %v (+20 %%)", n, got, want)
		}
	}
	// Past the schedule's end, the last step repeats however many failures.
	if got := backoff(1000, schedule, mid); got != 30*time.Second {
		t.Errorf("backoff(1000) = %v, want the last step, 30s", got)
	}
	// Random draws stay within the bounds, and spread over them.
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 6; n++ {
		d := step(n)
		lo, hi := d, d
		for range 1000 {
			got := backoff(n, schedule, r)
			if got < d*4/5-time.Nanosecond || got > d*6/5 {
				t.Fatalf("backoff(%d) = %v, outside %v ±20 %%", n, got, d)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		if lo > d*17/20 || hi < d*23/20 {
			t.Errorf("backoff(%d) over 1000 draws spans %v to %v: want most of %v ±20 %%", n, lo, hi, d)
		}
	}
}

// A schedule of one step is that step after every failure.
func TestBackoffOfOneStep(t *testing.T) {
	mid := rand.New(fixed(1 << 52))
	for _, n := range []int{1, 2, 50} {
		if got := backoff(n, []time.Duration{time.Minute}, mid); got != time.Minute {
			t.Errorf("backoff(%d) = %v, want 1m", n, got)
		}
	}
}
