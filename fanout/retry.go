package fanout

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// backoff returns a full-jitter exponential delay for the n-th retry
// (n starts at 1): uniform in [0, min(max, base·2^(n-1))], as Firebase asks
// ("exponential backoff with jitter") to spread retries out.
func backoff(base, max time.Duration, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	ceiling := base
	for i := 1; i < n && ceiling < max; i++ {
		ceiling *= 2
	}
	if ceiling > max {
		ceiling = max
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// delayQueue holds targets waiting to be retried, so that no worker sits
// idle through a backoff while other tokens could be sent.
type delayQueue struct {
	mu   sync.Mutex
	h    itemHeap
	wake chan struct{}
}

func newDelayQueue() *delayQueue {
	return &delayQueue{wake: make(chan struct{}, 1)}
}

func (q *delayQueue) push(it item) {
	q.mu.Lock()
	heap.Push(&q.h, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run moves due items to out until stop is closed. Once ctx is done it
// hands every queued item to drop instead (the broadcast is stopping).
func (q *delayQueue) run(ctx context.Context, stop <-chan struct{}, out chan<- item, drop func(item), pace Pacer) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		if ctx.Err() != nil {
			items := q.h
			q.h = nil
			q.mu.Unlock()
			for _, it := range items {
				drop(it)
			}
			select {
			case <-stop:
				return
			case <-q.wake:
			}
			continue
		}
		var wait time.Duration = -1
		if len(q.h) > 0 {
			wait = time.Until(q.h[0].due)
			if wait <= 0 {
				it := heap.Pop(&q.h).(item)
				q.mu.Unlock()
				// A retry is a send like any other: it keeps the pace.
				if pace != nil && pace.Wait(ctx) != nil {
					drop(it)
					continue
				}
				select {
				case out <- it:
				case <-ctx.Done():
					drop(it)
				}
				continue
			}
		}
		q.mu.Unlock()
		var tc <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			tc = timer.C
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
		case <-q.wake:
		case <-tc:
		}
	}
}

type itemHeap []item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	*h = old[:n-1]
	return it
}
