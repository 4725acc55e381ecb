package fcm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
)

// The firebase SDK retries 503 and network errors by itself, up to 4 times
// (waits 0, 1, 2, 4 s), and that cannot be configured. Left alone, every
// engine attempt could hide five HTTP requests, and MaxAttempts engine
// attempts could become 5×MaxAttempts requests to FCM.
//
// attemptTransport sits under the SDK and counts every HTTP request per
// token against the token's budget (MaxAttempts). When a request spends the
// last of the budget it stops the SDK from retrying:
//   - a 503 gets a Retry-After longer than the SDK's 2-minute cap, which the
//     SDK reads as "do not retry" (the original header is kept under
//     originalRetryAfter for our own classification);
//   - a network error cancels the attempt's context with errBudgetSpent, so
//     the SDK's retry wait returns at once.
//
// So the worst case is exactly MaxAttempts HTTP requests per token.

const originalRetryAfter = "X-Pushfan-Original-Retry-After"

var errBudgetSpent = errors.New("attempt budget spent")

type attemptKey struct{}

// attemptState is the budget of the token being sent, carried in the send
// context (the SDK calls the transport synchronously, inside Send).
type attemptState struct {
	used atomic.Int32 // HTTP requests made for this token so far
	max  int32
	// stop cancels the current send with a cause classify reads.
	stop func(error)
}

func withAttempts(ctx context.Context, st *attemptState) context.Context {
	return context.WithValue(ctx, attemptKey{}, st)
}

type attemptTransport struct{ base http.RoundTripper }

// budgetTransport returns an http.RoundTripper that enforces the engine's
// per-token attempt budget on the SDK's internal retries. Requests without a
// budget in their context (the direct client's) pass through unchanged.
func budgetTransport(base http.RoundTripper) http.RoundTripper {
	return &attemptTransport{base: base}
}

func (t *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(attemptKey{}).(*attemptState)
	if st == nil {
		return t.base.RoundTrip(req)
	}
	if st.used.Load() >= st.max {
		// Only reachable when the SDK retries after we spent the budget on
		// a network error whose cancel raced with its retry.
		err := fmt.Errorf("%w (%d HTTP requests)", errBudgetSpent, st.max)
		st.stop(err)
		return nil, err
	}
	n := st.used.Add(1)
	resp, err := t.base.RoundTrip(req)
	if n < st.max {
		return resp, err
	}
	if err != nil {
		st.stop(fmt.Errorf("%w after %d HTTP requests: %w", errBudgetSpent, n, err))
		return nil, err
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		// Keep the server's value (none is kept as empty) for classify.
		resp.Header.Set(originalRetryAfter, resp.Header.Get("Retry-After"))
		resp.Header.Set("Retry-After", "86400") // > the SDK's 2 min MaxDelay: no retry
	}
	return resp, nil
}
