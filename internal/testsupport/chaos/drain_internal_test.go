package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
)

// TestTheDrainWaitsForAWebhookEventsNextAttempt (finding 8): an event
// whose next attempt is due after the drain's floor is waited for until
// then (and its attempt's margin); one still undelivered past that fails,
// naming its attempts; a due time past the ceiling is not waited for.
func TestTheDrainWaitsForAWebhookEventsNextAttempt(t *testing.T) {
	db := testdb.New(t).SQL
	ctx := t.Context()
	add := func(msg string, attempts int, dueIn time.Duration) {
		t.Helper()
		if _, err := db.Exec("INSERT INTO webhook_outbox (msg_id, endpoint, type, body, attempts, next_at) VALUES (?, 'sink', 'broadcast.finished', '{}', ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)",
			msg, attempts, dueIn.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
	deliver := func(msg string) {
		if _, err := db.Exec("UPDATE webhook_outbox SET status = 'delivered', delivered_at = UTC_TIMESTAMP(6) WHERE msg_id = ?", msg); err != nil {
			t.Error(err)
		}
	}
	const floor, margin, ceiling = 200 * time.Millisecond, 2 * time.Second, 10 * time.Second

	// Due in 1.5 s, delivered at 1.7 s: well past the floor, inside the
	// due time and its margin (3.5 s).
	add("msg_a", 4, 1500*time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(1700 * time.Millisecond)
		deliver("msg_a")
	}()
	start := time.Now()
	err := awaitWebhooks(ctx, db, floor, margin, ceiling)
	<-done
	if err != nil {
		t.Fatalf("an event delivered at its next attempt's due time failed the drain after %v: %v", time.Since(start), err)
	}

	// Due in 500 ms and never delivered: an error once its due time and
	// margin have passed, not before.
	add("msg_b", 3, 500*time.Millisecond)
	start = time.Now()
	err = awaitWebhooks(ctx, db, floor, margin, ceiling)
	if err == nil || !strings.Contains(err.Error(), "1 webhook events still undelivered") || !strings.Contains(err.Error(), "most attempts of one: 3") {
		t.Fatalf("an event undelivered past its due time: got %v, want the count and its 3 attempts", err)
	}
	if waited := time.Since(start); waited < 2400*time.Millisecond {
		t.Fatalf("gave up after %v, before the event's due time (500 ms) and the margin (2 s)", waited)
	}
	deliver("msg_b")

	// Due an hour from now (a stuck deliverer's): only the floor.
	add("msg_c", 5, time.Hour)
	wctx, cancel := context.WithTimeout(ctx, ceiling)
	defer cancel()
	if err := awaitWebhooks(wctx, db, floor, margin, ceiling); err == nil || wctx.Err() != nil {
		t.Fatalf("an event due past the ceiling: got %v (context %v), want an error at the floor", err, wctx.Err())
	}
}
