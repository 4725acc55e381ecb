package cron

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// failingSubmitter fails the first failFirst attempts of every fire (all
// of them when failFirst < 0), as a database outage over a fire's second
// does, and records what got through and what was recorded skipped.
type failingSubmitter struct {
	failFirst int
	mu        sync.Mutex
	attempts  map[time.Time]int
	fired     chan time.Time
	skipped   chan string
}

func (f *failingSubmitter) FireJob(_ context.Context, _ *Compiled, at time.Time) (uint64, bool, error) {
	f.mu.Lock()
	f.attempts[at]++
	n := f.attempts[at]
	f.mu.Unlock()
	if f.failFirst < 0 || n <= f.failFirst {
		return 0, false, errors.New("find by idempotency_key: invalid connection")
	}
	select {
	case f.fired <- at:
	default:
	}
	return uint64(at.Unix()), false, nil
}

func (f *failingSubmitter) LastFireTime(context.Context, string) (time.Time, error) {
	return time.Time{}, nil
}

func (f *failingSubmitter) RecordSkippedFires(_ context.Context, _ string, fires []time.Time, reason string) error {
	for range fires {
		select {
		case f.skipped <- reason:
		default:
		}
	}
	return nil
}

func startFailing(t *testing.T, failFirst int, retryFor time.Duration) *failingSubmitter {
	t.Helper()
	jobs, err := Compile([]Job{{Name: "tick", Schedule: "*/1 * * * * *", Audience: map[string]any{"all": true}, Message: JobMessage{Title: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	sub := &failingSubmitter{failFirst: failFirst, attempts: map[time.Time]int{}, fired: make(chan time.Time, 16), skipped: make(chan string, 16)}
	sc := NewScheduler(jobs, sub, slog.New(slog.DiscardHandler))
	sc.retryFor, sc.retryBase = retryFor, 10*time.Millisecond
	sc.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sc.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return sub
}

// A fire whose first attempts fail (every instance met the database down
// at that second) is retried until it goes through: the soak lost the
// 10:05:00 fire of an every-minute job this way.
func TestAFailedFireIsRetried(t *testing.T) {
	sub := startFailing(t, 3, time.Minute)
	var at time.Time
	select {
	case at = <-sub.fired:
	case <-time.After(5 * time.Second):
		t.Fatal("timed out after 5s waiting for a fire to go through on its 4th attempt")
	}
	sub.mu.Lock()
	n := sub.attempts[at]
	sub.mu.Unlock()
	if n != 4 {
		t.Fatalf("the fire at %v went through on attempt %d, want 4 (3 failures, then retried)", at, n)
	}
	select {
	case reason := <-sub.skipped:
		t.Fatalf("a fire was recorded skipped (%q) though its retry went through", reason)
	default:
	}
}

// A fire that keeps failing is retried for the retry window, then
// recorded skipped, so the gap has a trace.
func TestAFireFailingPastTheRetryWindowIsRecordedSkipped(t *testing.T) {
	sub := startFailing(t, -1, 200*time.Millisecond)
	select {
	case reason := <-sub.skipped:
		if reason != "every attempt failed until the retry window passed" {
			t.Fatalf("skipped because %q, want the retry window's reason", reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timed out after 5s waiting for a fire failing every attempt to be recorded skipped")
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, n := range sub.attempts {
		if n > 1 {
			return // retried before giving up
		}
	}
	t.Fatalf("no fire was attempted more than once: %v", sub.attempts)
}
