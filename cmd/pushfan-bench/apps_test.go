package main

import "testing"

// The joint rate is taken over the span in which every app is between
// 10 % and 90 % of its audience: from the sample at which the last one
// reached 10 % to the one at which the first reached 90 %.
func TestJointSustained(t *testing.T) {
	// Two apps sampled every second: a of 1000 at 100/s, b of 400 at
	// 40/s after a second's late start.
	var a, b appRun
	a.N, b.N = 1000, 400
	for s := int64(0); s <= 12; s++ {
		a.Samples = append(a.Samples, sample{AtMS: s * 1000, Accepted: min(100*s, 1000)})
		b.Samples = append(b.Samples, sample{AtMS: s * 1000, Accepted: min(40*max(s-1, 0), 400)})
	}
	// b reaches 10 % (40) at 2 s; a reaches 90 % (900) at 9 s: from 2 s to
	// 9 s a sent 700 and b 280.
	if got := jointSustained([]*appRun{&a, &b}); got != 140 {
		t.Fatalf("joint rate %v, want (700+280)/7 = 140", got)
	}
	if got := jointSustained([]*appRun{{N: 10, Samples: []sample{{AtMS: 0, Accepted: 10}}}}); got != 0 {
		t.Fatalf("a run too short to tell: %v, want 0", got)
	}
}
