package run

import (
	"context"
	"testing"
	"time"
)

// waitOpens reports whether g.Wait returns within d.
func waitOpens(g *storeGate, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return g.Wait(ctx) == nil
}

// However fresh the last checkpoint, no more sends pass than the app's
// allowance past it: a full rate-limiter bucket spent at once by the
// workers waiting at a reopened gate cannot widen what a crash repeats.
// A confirmed checkpoint frees the sends that had passed when its
// outcomes were taken, not those that passed while it committed.
func TestStoreGateCountsTheSendsPastTheLastCheckpoint(t *testing.T) {
	allowed := int64(minUnstored + 4)
	g := newStoreGate(time.Hour, time.Now(), newUnstored(func() int64 { return allowed }))
	for i := range allowed {
		if !g.Open() {
			t.Fatalf("send %d of an allowance of %d was held", i+1, allowed)
		}
	}
	if g.Open() {
		t.Fatalf("a send past the allowance of %d passed a fresh gate", allowed)
	}
	if waitOpens(g, 50*time.Millisecond) {
		t.Fatal("Wait returned while the allowance was spent")
	}
	m := g.mark() // a checkpoint takes its outcomes: all sends so far
	g.confirmed(m)
	for i := range allowed {
		if !g.Open() {
			t.Fatalf("after a confirmed checkpoint, send %d of %d was held", i+1, allowed)
		}
	}
	// The next checkpoint's outcomes are taken now, and sends pass while it
	// commits: it frees only what had passed when it was taken.
	m = g.mark()
	if g.Open() {
		t.Fatal("a send passed while the allowance was spent and the checkpoint not yet stored")
	}
	g.confirmed(m)
	if !g.Open() {
		t.Fatal("a stored checkpoint left the gate closed")
	}
	// An allowance below the floor still lets the run send (it is read
	// anew at every checkpoint).
	allowed = 1
	g.confirmed(g.mark())
	for i := range minUnstored {
		if !g.Open() {
			t.Fatalf("send %d of the floor of %d was held", i+1, minUnstored)
		}
	}
	if g.Open() {
		t.Fatalf("a send past the floor of %d passed", minUnstored)
	}
}

// A stale checkpoint closes the gate; a confirmed one reopens it, even one
// whose commit took longer than the allowance (else slow commits would
// stop the run for good), and only for the allowance.
func TestStoreGateClosesWhenStaleAndReopensOnEveryConfirm(t *testing.T) {
	const flush = 20 * time.Millisecond
	start := time.Now()
	g := newStoreGate(flush, start, newUnstored(func() int64 { return 1 << 30 }))
	if !g.Open() {
		t.Fatal("a fresh gate is closed")
	}
	time.Sleep(flush + commitAllowance + 10*time.Millisecond) // past maxAge: the subject
	if g.Open() {
		t.Fatal("the gate is open with nothing stored for longer than the checkpoint interval and the allowance")
	}
	waited := make(chan bool, 1)
	go func() { waited <- waitOpens(g, 5*time.Second) }()
	// A slow commit: its outcomes were taken long ago, yet it opens the gate.
	g.confirmed(gateMark{at: start.Add(time.Millisecond), passed: 1})
	if !<-waited {
		t.Fatal("timed out after 5s waiting for a confirmed checkpoint to open the gate")
	}
	time.Sleep(confirmOpen + 10*time.Millisecond)
	if g.Open() {
		t.Fatal("a slow commit's confirmation keeps the gate open past the allowance")
	}
	g.confirmed(g.mark())
	if !g.Open() {
		t.Fatal("a fresh checkpoint leaves the gate closed")
	}
}

// The runs of one app share its window: a run whose checkpoint is
// committing sends on while another leaves room (the window is not split
// evenly over the runs), each run keeps a floor of its own, and a
// checkpoint of any run of the app opens the gates of all of them. Two
// apps' windows are independent: a saturated app never holds another's.
func TestStoreGateWindowIsTheAppsNotTheRuns(t *testing.T) {
	const allowed = 100
	a := newUnstored(func() int64 { return allowed })
	a1, a2 := newStoreGate(time.Hour, time.Now(), a), newStoreGate(time.Hour, time.Now(), a)
	for i := range allowed {
		if !a1.Open() {
			t.Fatalf("send %d of run 1 was held with its app's window of %d not spent", i+1, allowed)
		}
	}
	if a1.Open() {
		t.Fatal("run 1 sent past its app's window")
	}
	// Run 2 of the same app still has its floor, no more.
	for i := range minUnstored {
		if !a2.Open() {
			t.Fatalf("send %d of run 2's floor of %d was held", i+1, minUnstored)
		}
	}
	if a2.Open() {
		t.Fatal("run 2 sent past its floor while its app's window was spent by run 1")
	}
	// Another app's run is not held by app a's spent window.
	b := newStoreGate(time.Hour, time.Now(), newUnstored(func() int64 { return allowed }))
	for i := range allowed {
		if !b.Open() {
			t.Fatalf("send %d of app b was held by app a's spent window", i+1)
		}
	}
	// Run 1's checkpoint opens run 2 too.
	waited := make(chan bool, 1)
	go func() { waited <- waitOpens(a2, 5*time.Second) }()
	a1.confirmed(a1.mark())
	if !<-waited {
		t.Fatal("a checkpoint of run 1 left run 2 of the same app waiting for 5 s")
	}
	for i := range allowed - minUnstored {
		if !a2.Open() {
			t.Fatalf("send %d of run 2 was held once run 1's sends were stored", i+1)
		}
	}
	// A run that ends gives its unstored sends back to its app.
	a2.close()
	for i := range allowed {
		if !a1.Open() {
			t.Fatalf("send %d of run 1 was held by the sends of a run that ended", i+1)
		}
	}
	if a1.Open() {
		t.Fatal("run 1 sent past its app's window")
	}
}
