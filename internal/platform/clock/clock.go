// Package clock holds the waiting every long-running part does: a sleep
// that ends early when its context does.
package clock

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done (then it returns ctx's error). A
// non-positive d returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
