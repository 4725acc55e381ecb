package live

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/server/view"
)

// errNotFound stands for the domain's not-found error.
var errNotFound = errors.New("not found")

// TestWatchHubPollsOncePerTickForAllViewers: fifty viewers of one
// broadcast cost one read a tick, and all of them get every state up to
// the final one, after which their streams close and the poller ends.
func TestWatchHubPollsOncePerTickForAllViewers(t *testing.T) {
	var reads atomic.Int64
	final := atomic.Bool{}
	peek := func(_ context.Context, id uint64) (*model.Broadcast, error) {
		n := reads.Add(1)
		b := &model.Broadcast{ID: id, Status: model.StatusRunning, Counts: model.Counts{Targeted: 1000, Succeeded: n * 10}}
		if final.Load() {
			b.Status, b.Succeeded = model.StatusCompleted, 1000
		}
		return b, nil
	}
	h := New(peek, func(b *model.Broadcast) view.Broadcast { return view.Of(b, time.Now()) }, errNotFound, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.every = 20 * time.Millisecond
	defer func() { _ = h.Stop(context.Background()) }()

	const viewers = 50
	start := time.Now()
	chans := make([]<-chan []byte, viewers)
	for i := range chans {
		ch, leave, ok := h.Subscribe(7)
		if !ok {
			t.Fatal("subscribe refused on a running hub")
		}
		defer leave()
		chans[i] = ch
	}
	// Every viewer sees at least three states...
	for i, ch := range chans {
		for range 3 {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("viewer %d: no event within 10 s", i)
			}
		}
	}
	// ... while the broadcast was read once per tick, not per viewer.
	ticks := int64(time.Since(start)/h.every) + 1
	if n := reads.Load(); n > ticks+1 {
		t.Fatalf("%d reads in %d ticks for %d viewers: want at most one per tick", n, ticks, viewers)
	}
	final.Store(true)
	for i, ch := range chans {
		var last []byte
		deadline := time.After(10 * time.Second)
	drain:
		for {
			select {
			case ev, open := <-ch:
				if !open {
					break drain
				}
				last = ev
			case <-deadline:
				t.Fatalf("viewer %d: stream not closed within 10 s of the final state", i)
			}
		}
		var ev watchEvent
		if err := json.Unmarshal(last, &ev); err != nil || ev.Broadcast.Status != model.StatusCompleted || ev.Broadcast.Succeeded != 1000 || len(ev.Series) == 0 {
			t.Fatalf("viewer %d: last event %s (%v): want the completed state with a series", i, last, err)
		}
	}
	h.mu.Lock()
	left := len(h.watched)
	h.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d broadcasts still watched after the final state", left)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := h.Subscribe(7); ok {
		t.Fatal("a stopped hub took a viewer")
	}
}

// TestWatchHubStopsPollingWhenTheLastViewerLeaves: no reads for a page
// nobody has open.
func TestWatchHubStopsPollingWhenTheLastViewerLeaves(t *testing.T) {
	var reads atomic.Int64
	peek := func(_ context.Context, id uint64) (*model.Broadcast, error) {
		reads.Add(1)
		return &model.Broadcast{ID: id, Status: model.StatusRunning}, nil
	}
	h := New(peek, func(b *model.Broadcast) view.Broadcast { return view.Of(b, time.Now()) }, errNotFound, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.every = 10 * time.Millisecond
	defer func() { _ = h.Stop(context.Background()) }()
	ch, leave, _ := h.Subscribe(1)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no first event within 10 s")
	}
	leave()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.watched)
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poller still runs 10 s after the last viewer left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := reads.Load()
	time.Sleep(100 * time.Millisecond) // ten ticks' worth
	if after := reads.Load(); after != before {
		t.Fatalf("%d reads after the last viewer left", after-before)
	}
}

// A poller starts from the stored send rate: each full bucket spread over
// its seconds, the bucket still filling left out, two minutes at most.
func TestWatchBackfillsTheStoredRate(t *testing.T) {
	h := New(nil, nil, errNotFound, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	start := now.Add(-200 * time.Second).Truncate(5 * time.Second)
	var stored []model.SeriesPoint
	for at := start; !at.After(now); at = at.Add(5 * time.Second) {
		stored = append(stored, model.SeriesPoint{At: at, N: 500})
	}
	h.History = func(_ context.Context, _ uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error) {
		var out []model.SeriesPoint
		for _, p := range stored {
			if !p.At.Before(since.Truncate(5 * time.Second)) {
				out = append(out, p)
			}
		}
		return out, 5 * time.Second, nil
	}
	got := h.backfill(1)
	if len(got) != watchSeries {
		t.Fatalf("%d points, want the last %d seconds", len(got), watchSeries)
	}
	for i, p := range got {
		if p.PerSecond != 100 || (i > 0 && p.At.Sub(got[i-1].At) != time.Second) || p.At.After(now) {
			t.Fatalf("point %d: %+v (previous %+v), want 100/s a second apart, none after now", i, p, got[max(i-1, 0)])
		}
	}
}
