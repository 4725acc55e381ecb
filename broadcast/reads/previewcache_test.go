package reads

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing with what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *previewCache) waiters(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		return e.waiting
	}
	return 0
}

// Callers of one audience share one count in flight and then its answer
// for the TTL; another audience, an expired one or a failed count is
// counted again.
func TestPreviewCacheSharesOneCountPerAudience(t *testing.T) {
	c := &previewCache{ttl: 30 * time.Second}
	t0 := time.Now()
	var calls atomic.Int64
	release := make(chan struct{})
	load := func(ctx context.Context) (preview, error) {
		calls.Add(1)
		select {
		case <-release:
			return preview{count: 42, sample: []uint64{1, 2}}, nil
		case <-ctx.Done():
			return preview{}, ctx.Err()
		}
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.get(context.Background(), "all", t0, load)
			if err != nil || p.count != 42 || len(p.sample) != 2 {
				t.Errorf("shared count: %d %v %v", p.count, p.sample, err)
			}
		}()
	}
	waitFor(t, "five callers waiting on the count in flight", func() bool { return c.waiters("all") == 5 })
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("five callers ran %d counts, want 1", n)
	}
	if p, _ := c.get(context.Background(), "all", t0.Add(29*time.Second), load); p.count != 42 || calls.Load() != 1 {
		t.Fatalf("within the TTL: %d after %d counts, want the cached 42 after 1", p.count, calls.Load())
	}
	if _, _ = c.get(context.Background(), "all", t0.Add(30*time.Second), load); calls.Load() != 2 {
		t.Fatalf("after the TTL: %d counts, want 2", calls.Load())
	}
	if _, _ = c.get(context.Background(), "user_ids", t0, load); calls.Load() != 3 {
		t.Fatalf("another audience: %d counts, want 3", calls.Load())
	}

	failing := func(context.Context) (preview, error) {
		calls.Add(1)
		return preview{}, errors.New("database timeout")
	}
	before := calls.Load()
	for range 2 {
		if _, err := c.get(context.Background(), "named", t0, failing); err == nil {
			t.Fatal("a failed count answered no error")
		}
	}
	if n := calls.Load() - before; n != 2 {
		t.Fatalf("a failed count was kept: %d counts for two calls", n)
	}
}

// A caller that gives up (the next keystroke aborts its request) leaves
// the count running for the others; once nobody waits, it is canceled.
func TestPreviewCacheCancelsACountNobodyWaitsFor(t *testing.T) {
	c := &previewCache{ttl: time.Minute}
	canceled := make(chan struct{})
	release := make(chan struct{})
	load := func(ctx context.Context) (preview, error) {
		select {
		case <-release:
			return preview{count: 7}, nil
		case <-ctx.Done():
			close(canceled)
			return preview{}, ctx.Err()
		}
	}
	leaver, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := c.get(leaver, "k", time.Now(), load); left <- err }()
	stayed := make(chan int64, 1)
	waitFor(t, "the first caller waiting", func() bool { return c.waiters("k") == 1 })
	go func() { p, _ := c.get(context.Background(), "k", time.Now(), load); stayed <- p.count }()
	waitFor(t, "the second caller waiting", func() bool { return c.waiters("k") == 2 })
	leave()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left: %v", err)
	}
	select {
	case <-canceled:
		t.Fatal("the count was canceled while a caller still waited")
	default:
	}
	close(release)
	if n := <-stayed; n != 7 {
		t.Fatalf("the caller that stayed: %d, want 7", n)
	}

	// Alone, a caller that leaves ends the count.
	c = &previewCache{ttl: time.Minute}
	release = make(chan struct{})
	leaver, leave = context.WithCancel(context.Background())
	go func() { _, err := c.get(leaver, "k", time.Now(), load); left <- err }()
	waitFor(t, "the caller waiting", func() bool { return c.waiters("k") == 1 })
	leave()
	<-left
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out after 10s waiting for the count nobody waits for to be canceled")
	}
}
