package broadcast

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
	g := newStoreGate(flush, start)
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
	g.confirmed(start.Add(time.Millisecond))
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
	g.confirmed(time.Now())
	if !g.Open() {
		t.Fatal("a fresh checkpoint leaves the gate closed")
	}
}
