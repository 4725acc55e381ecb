package run

import (
	"context"
	"testing"
	"time"
)

// A stale checkpoint closes the gate; a confirmed one reopens it, even one
// whose commit took longer than the allowance (else slow commits would
// stop the run for good), and only for the allowance.
func TestStoreGateClosesWhenStaleAndReopensOnEveryConfirm(t *testing.T) {
	const flush = 20 * time.Millisecond
	start := time.Now()
	g := newStoreGate(flush, start, func() int64 { return 1 << 30 })
	if !g.Open() {
		t.Fatal("a fresh gate is closed")
	}
	time.Sleep(flush + commitAllowance + 10*time.Millisecond) // past maxAge: the subject
	if g.Open() {
		t.Fatal("the gate is open with nothing stored for longer than the checkpoint interval and the allowance")
	}
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		waited <- g.Wait(ctx)
	}()
	// A slow commit: its outcomes were taken long ago, yet it opens the gate.
	g.confirmed(gateMark{at: start.Add(time.Millisecond)})
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
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

// However fresh the last checkpoint, no more sends pass than the run's
// allowance past it: a full rate-limiter bucket spent at once by the
// workers waiting at a reopened gate cannot widen what a crash repeats.
// A confirmed checkpoint frees the sends that had passed when its
// outcomes were taken, not those that passed while it committed.
func TestStoreGateCountsTheSendsPastTheLastCheckpoint(t *testing.T) {
	allowed := int64(minUnstored + 4)
	g := newStoreGate(time.Hour, time.Now(), func() int64 { return allowed })
	for i := range allowed {
		if !g.Open() {
			t.Fatalf("send %d of an allowance of %d was held", i+1, allowed)
		}
	}
	if g.Open() {
		t.Fatalf("a send past the allowance of %d passed a fresh gate", allowed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); err == nil {
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
	// A share below the floor still lets the run send (the allowance is
	// read anew at every checkpoint).
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
