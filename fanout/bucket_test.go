package fanout

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitersOf starts n takes on b and returns their results as they come.
func waitersOf(ctx context.Context, b *permitBucket, n int, urgent bool) <-chan error {
	got := make(chan error, n)
	for range n {
		go func() {
			_, err := b.take(ctx, urgent)
			got <- err
		}()
	}
	return got
}

// queued waits until the bucket holds n waiters (urgent and bulk).
func queued(t *testing.T, b *permitBucket, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		live := b.urgent.live + b.bulk.live
		b.mu.Unlock()
		if live == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d waiters to queue (%d did)", n, live)
		}
		time.Sleep(time.Millisecond)
	}
}

// permitsIn counts the results that arrive within d; every one must be a
// permit.
func permitsIn(t *testing.T, got <-chan error, d time.Duration) int {
	t.Helper()
	n := 0
	timeout := time.After(d)
	for {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("a waiter had %v, want a permit", err)
			}
			n++
		case <-timeout:
			return n
		}
	}
}

// A waiter that leaves without its permit takes no token: after ten left a
// bucket that accrues nothing, the three tokens Fill gives go to the next
// three waiters, and the fourth waits.
func TestBucketWaiterThatLeavesTakesNoToken(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.setRate(0)
	if _, err := b.take(context.Background(), false); err != nil { // its one token
		t.Fatal(err)
	}
	b.setBurst(10)
	left, cancel := context.WithCancel(context.Background())
	gone := waitersOf(left, b, 10, false)
	queued(t, b, 10)
	cancel()
	for range 10 {
		select {
		case err := <-gone:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a waiter whose context ended had %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for the waiters whose context ended to leave")
		}
	}
	b.fill(3)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	got := waitersOf(ctx, b, 4, false)
	if n := permitsIn(t, got, 200*time.Millisecond); n != 3 {
		t.Fatalf("%d permits from a bucket filled with 3 after ten waiters left, want 3", n)
	}
	queued(t, b, 1)
}

// Waiters queued when a pause begins get nothing until it ends; then the
// ramp's rate and its burst of one apply.
func TestBucketGivesNothingInAPause(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.setRate(0) // the waiters queue, and stay queued until the pause
	b.setBurst(10)
	b.fill(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := waitersOf(ctx, b, 5, false)
	queued(t, b, 5)
	until := time.Now().Add(300 * time.Millisecond)
	b.pause(until, 1000, 1)
	var first time.Time
	for range 5 {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			if first.IsZero() {
				first = time.Now()
			}
		case <-ctx.Done():
			t.Fatal("timed out waiting for the paused waiters' permits")
		}
	}
	if first.Before(until) {
		t.Fatalf("a permit %v before the pause ended", until.Sub(first))
	}
}

// Urgent waiters go before the bulk waiters queued ahead of them.
func TestBucketServesUrgentFirst(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.setRate(0)
	b.setBurst(5)
	b.fill(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bulk := waitersOf(ctx, b, 5, false)
	queued(t, b, 5)
	urgent := waitersOf(ctx, b, 2, true)
	queued(t, b, 7)
	b.fill(2)
	if n := permitsIn(t, urgent, 200*time.Millisecond); n != 2 {
		t.Fatalf("%d of 2 urgent waiters had a permit", n)
	}
	if n := permitsIn(t, bulk, 50*time.Millisecond); n != 0 {
		t.Fatalf("%d bulk waiters had a permit meant for the urgent ones", n)
	}
}
