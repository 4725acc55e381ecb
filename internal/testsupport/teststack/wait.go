package teststack

import (
	"testing"
	"time"
)

// WaitEvery polls cond every `every` (coarser for a condition that costs
// an HTTP request or a query, finer where the moment matters) until it
// holds. If it still does not hold after within, the test fails saying
// what it was waiting for. cond runs on the calling goroutine, so it may
// itself call tb.Fatal (a state that means the awaited one can no longer
// come).
func WaitEvery(tb testing.TB, what string, within, every time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(every)
	}
}

// Receive waits for a value (or the close) of ch, failing the test after
// within with what it was waiting for.
func Receive[T any](tb testing.TB, what string, within time.Duration, ch <-chan T) T {
	tb.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("timed out after %v waiting for %s", within, what)
		var zero T
		return zero
	}
}
