package fanout

import (
	"context"
	"errors"
	"sync"
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

// permits waits for n permits from got, failing on an error or after 5 s.
func permits(t *testing.T, got <-chan error, n int, what string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for i := range n {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: a waiter had %v, want a permit", what, err)
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s: %d of %d permits", what, i, n)
		}
	}
}

// noneYet fails if a result from got is there already.
func noneYet(t *testing.T, got <-chan error, who string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s had %v", who, err)
	default:
	}
}

// A waiter that leaves without its permit takes no token and gives none
// back: after ten left a bucket that accrues nothing, the next four wait,
// the three tokens Fill gives go to three of them, and the fourth waits.
func TestBucketWaiterThatLeavesTakesNoToken(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.setRate(0)
	if _, err := b.take(context.Background(), false); err != nil { // its one token
		t.Fatal(err)
	}
	b.set(0, 10)
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
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	got := waitersOf(ctx, b, 4, false)
	queued(t, b, 4) // the ten gave back no token: there is none to take
	b.fill(3)
	permits(t, got, 3, "the three tokens Fill gave after ten waiters left")
	queued(t, b, 1) // the fourth: no token for it (the bucket accrues none)
	noneYet(t, got, "a fourth waiter, from a bucket filled with 3")
}

// Nothing is given in a pause: not to the waiters queued when it begins,
// nor the token the bucket held then.
func TestBucketGivesNothingInAPause(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.set(0, 10) // the waiters queue, and stay queued until the pause
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

	// A token already there when the pause begins waits for its end too.
	b = newPermitBucket(time.Now) // its one token
	b.setRate(0)
	until = time.Now().Add(300 * time.Millisecond)
	b.pause(until, 1000, 1)
	if _, err := b.take(ctx, false); err != nil {
		t.Fatal(err)
	}
	if early := time.Until(until); early > 0 {
		t.Fatalf("the bucket's token was given %v before the pause ended", early)
	}
}

// Urgent waiters go before the bulk waiters queued ahead of them.
func TestBucketServesUrgentFirst(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.set(0, 5)
	b.fill(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bulk := waitersOf(ctx, b, 5, false)
	queued(t, b, 5)
	urgent := waitersOf(ctx, b, 2, true)
	queued(t, b, 7)
	b.fill(2)
	permits(t, urgent, 2, "the two urgent waiters' permits")
	queued(t, b, 5) // every bulk waiter still waits
	noneYet(t, bulk, "a bulk waiter, with a permit meant for the urgent ones")
}

// Waiters that leave a bucket giving nothing do not pile up in its queue.
func TestBucketForgetsWaitersThatLeft(t *testing.T) {
	b := newPermitBucket(time.Now)
	b.set(0, 3)
	b.fill(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stay := waitersOf(ctx, b, 3, false)
	queued(t, b, 3)
	for range 1000 {
		left, leave := context.WithCancel(context.Background())
		leave()
		if _, err := b.take(left, false); !errors.Is(err, context.Canceled) {
			t.Fatalf("a take whose context had ended: %v", err)
		}
	}
	b.mu.Lock()
	held := len(b.bulk.ws)
	b.mu.Unlock()
	if held > 2*3+64 {
		t.Fatalf("the queue holds %d waiters after 1,000 left and 3 stayed", held)
	}
	b.fill(3)
	permits(t, stay, 3, "the three that stayed")
}

// A waiter that leaves does not put off the next in line: the timer stays
// set for when the next token is there. (It was set from the tokens as of
// the last change, so each leave moved it later by the time since; waiters
// leaving one after the other could hold the rest back for good.) A fake
// clock: the timer's instant is checked, not waited for.
func TestBucketLeavingDoesNotPutOffTheNext(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	b := newPermitBucket(now)
	b.setRate(10) // a token each 100 ms
	b.fill(0)
	due := now().Add(100 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitersOf(ctx, b, 1, false)
	queued(t, b, 1)
	for i := range 5 {
		left, leave := context.WithCancel(context.Background())
		gone := waitersOf(left, b, 1, false)
		queued(t, b, 2)
		mu.Lock()
		clock = clock.Add(15 * time.Millisecond) // the leave comes later
		mu.Unlock()
		leave()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for a waiter whose context ended to leave")
		}
		b.mu.Lock()
		at := b.timerAt
		b.mu.Unlock()
		if d := at.Sub(due); d < -time.Microsecond || d > time.Microsecond { // float rounding
			t.Fatalf("after leave %d the timer is set %v after the next token is due", i+1, at.Sub(due))
		}
	}
}
