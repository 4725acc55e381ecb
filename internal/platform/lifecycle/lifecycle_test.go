package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLoopStartStop(t *testing.T) {
	var l Loop
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if l.Start(context.Background(), func(context.Context) { t.Error("started after Stop") }) {
		t.Fatal("Start after Stop started")
	}

	var m Loop
	ran := make(chan struct{})
	if !m.Start(context.Background(), func(ctx context.Context) { close(ran); <-ctx.Done() }) {
		t.Fatal("did not start")
	}
	if m.Start(context.Background(), func(context.Context) { t.Error("started twice") }) {
		t.Fatal("second Start started")
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop never ran")
	}
	for range 2 {
		if err := m.Stop(context.Background()); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
}

func TestLoopStopHonoursItsDeadline(t *testing.T) {
	var l Loop
	release := make(chan struct{})
	l.Start(context.Background(), func(context.Context) { <-release }) // ignores its context
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop of a stuck loop: %v, want the deadline", err)
	}
	close(release)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("stop once it ended: %v", err)
	}
}

func TestGroupRefusesAfterClose(t *testing.T) {
	var g Group
	done := make(chan struct{})
	if !g.Go(func() { <-done }) {
		t.Fatal("Go refused before Close")
	}
	g.Close()
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go after Close ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with a goroutine running: %v", err)
	}
	close(done)
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A latch's Done is closed whether it was asked for before or after the
// close; a nil latch is never closed.
func TestLatch(t *testing.T) {
	var l Latch
	before := l.Done()
	if l.Closed() {
		t.Fatal("a new latch is closed")
	}
	l.Close()
	l.Close()
	for _, ch := range []<-chan struct{}{before, l.Done()} {
		select {
		case <-ch:
		default:
			t.Fatal("Done is open after Close")
		}
	}
	if !l.Closed() {
		t.Fatal("Closed is false after Close")
	}
	var none *Latch
	none.Close()
	if none.Closed() || none.Done() != nil {
		t.Fatal("a nil latch closed")
	}
}
