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

// A staggered run: the first app's rate before the second started, and
// both apps' rates while both ran.
func TestStaggeredOf(t *testing.T) {
	// a: 1000 tokens at 100/s, then 50/s once b starts at 4 s; b: 400
	// tokens at 40/s from 4 s.
	var a, b appRun
	a.N, b.N = 1000, 400
	for s := int64(0); s <= 20; s++ {
		acc := 100 * s
		if s > 4 {
			acc = 400 + 50*(s-4)
		}
		a.Samples = append(a.Samples, sample{AtMS: s * 1000, Accepted: min(acc, 1000)})
		b.Samples = append(b.Samples, sample{AtMS: s * 1000, Accepted: min(40*max(s-4, 0), 400)})
	}
	st := staggeredOf(&appsLevel{Apps: []*appRun{&a, &b}, StaggeredAtMS: 4000})
	// a alone: from 10 % (1 s) to 4 s; both: from b's 10 % (5 s) to b's
	// 90 % (13 s), before a's 90 % (14 s).
	if st.FirstAlone != 100 || st.FirstBeside != 50 || st.Second != 40 {
		t.Fatalf("alone %v, beside %v, second %v; want 100, 50, 40", st.FirstAlone, st.FirstBeside, st.Second)
	}
}
