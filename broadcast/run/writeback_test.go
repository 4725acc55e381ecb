package run

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pushfan/repository"
)

func deadTokens(toks ...string) []repository.Invalidation {
	out := make([]repository.Invalidation, len(toks))
	for i, tok := range toks {
		out[i] = repository.Invalidation{TokenID: uint64(i + 1), Token: tok, Reason: "UNREGISTERED"}
	}
	return out
}

func refused(dead []repository.Invalidation, toks ...string) error {
	e := &repository.WriteBackError{}
	for _, d := range dead {
		if slices.Contains(toks, d.Token) {
			e.Failed = append(e.Failed, repository.WriteBackFailure{Invalidation: d, Err: errors.New("refused")})
		}
	}
	return e
}

func tokensOf(dead []repository.Invalidation) []string {
	var out []string
	for _, d := range dead {
		out = append(out, d.Token)
	}
	return out
}

// A token whose write-back keeps failing is left out after
// writeBackAttempts failed attempts, the waits between them doubling; the
// others stay in. A run whose write-back is broken gives the next
// checkpoint's failing tokens one retry only, until a write-back works.
func TestWriteBacksLeaveOutWhatKeepsFailing(t *testing.T) {
	w := writeBacks{lease: 10 * time.Second}
	dead := deadTokens("a", "b", "c")
	now := time.Now()
	var waits []time.Duration
	for attempt := 1; attempt <= writeBackAttempts; attempt++ {
		skips, isWB := w.attemptFailed(refused(dead, "b"), now)
		if !isWB {
			t.Fatal("a write-back error not recognised")
		}
		if want := map[bool]int64{true: 1}[attempt == writeBackAttempts]; skips != want {
			t.Fatalf("attempt %d: %d left out, want %d", attempt, skips, want)
		}
		waits = append(waits, w.due.Sub(now))
		now = w.due
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 0}; !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v (the checkpoint without the token goes at once)", waits, want)
	}
	if got := tokensOf(w.keep(dead)); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("kept %v, want [a c]", got)
	}
	w.ran = true
	if skipped := w.stored(true); len(skipped) != 1 || skipped[0].inv.Token != "b" || skipped[0].attempts != writeBackAttempts {
		t.Fatalf("stored: skipped %+v, want b after %d attempts", skipped, writeBackAttempts)
	}
	if !w.broken || len(w.keep(dead)) != 3 {
		t.Fatalf("after the skip: broken %v, keep %v; want broken and a fresh record", w.broken, w.keep(dead))
	}

	// Broken: the next checkpoint's failing token gets one retry.
	if skips, _ := w.attemptFailed(refused(dead, "c"), now); skips != 0 {
		t.Fatalf("broken run, first failure: %d left out", skips)
	}
	if skips, _ := w.attemptFailed(refused(dead, "c"), w.due); skips != 1 {
		t.Fatalf("broken run, second failure: %d left out, want 1", skips)
	}
	w.stored(true)
	// A checkpoint that writes back without a failure mends the run.
	w.ran = true
	w.stored(true)
	if w.broken {
		t.Fatal("still broken after a write-back worked")
	}

	// Any other error is the checkpoint's, not the write-back's.
	if skips, isWB := w.attemptFailed(errors.New("connection reset"), now); isWB || skips != 0 || !w.due.IsZero() {
		t.Fatalf("other error: %d, %v, due %v", skips, isWB, w.due)
	}
}

// However many attempts are left, a token is left out once a quarter of
// the lease has passed since the checkpoint's first failure, and no wait
// is longer than an eighth of it.
func TestWriteBacksStayWithinTheLease(t *testing.T) {
	lease := 400 * time.Millisecond // a quarter is 100 ms: less than the attempts' waits
	w := writeBacks{lease: lease}
	dead := deadTokens("a")
	start := time.Now()
	now := start
	attempts := 0
	for w.skips() == 0 && attempts < 10 {
		attempts++
		w.attemptFailed(refused(dead, "a"), now)
		if d := w.due.Sub(now); d > lease/writeBackMaxWait {
			t.Fatalf("a wait of %v, more than %v", d, lease/writeBackMaxWait)
		}
		now = w.due
	}
	if w.skips() != 1 || attempts >= writeBackAttempts || now.Sub(start) > lease/writeBackWithin {
		t.Fatalf("left out %d after %d attempts and %v, want 1 within %v, before %d attempts",
			w.skips(), attempts, now.Sub(start), lease/writeBackWithin, writeBackAttempts)
	}
}
