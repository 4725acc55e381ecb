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

// A finished broadcast's series is its whole run: a point per stored
// bucket, a missing one as zero, merged into wider steps past
// wholeRunPoints; a run shorter than two buckets has none.
func TestWatchDrawsAFinishedBroadcastsWholeRun(t *testing.T) {
	h := New(nil, nil, errNotFound, slog.New(slog.NewTextHandler(io.Discard, nil)))
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var stored []model.SeriesPoint
	reads := 0
	h.History = func(_ context.Context, _ uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error) {
		reads++
		if since.After(start) {
			t.Fatalf("read from %v, after the start %v", since, start)
		}
		return stored, 5 * time.Second, nil
	}
	at := func(d time.Duration) *time.Time { x := start.Add(d); return &x }

	// 30 s: six buckets, the third empty (not stored).
	stored = []model.SeriesPoint{{At: start, N: 50}, {At: start.Add(5 * time.Second), N: 100}, {At: start.Add(15 * time.Second), N: 25},
		{At: start.Add(20 * time.Second), N: 5}, {At: start.Add(25 * time.Second), N: 10}}
	got := h.wholeRun(1, &model.Broadcast{StartedAt: at(time.Second), FinishedAt: at(29 * time.Second)})
	want := []float64{10, 20, 0, 5, 1, 2}
	if len(got) != len(want) {
		t.Fatalf("%d points %+v, want %d", len(got), got, len(want))
	}
	for i, p := range got {
		if p.PerSecond != want[i] || !p.At.Equal(start.Add(time.Duration(i+1)*5*time.Second)) {
			t.Fatalf("point %d: %+v, want %v/s at the end of bucket %d", i, p, want[i], i)
		}
	}

	// An hour at 10 a bucket: 720 buckets merged three to a point.
	stored = nil
	for k := range 720 {
		stored = append(stored, model.SeriesPoint{At: start.Add(time.Duration(k) * 5 * time.Second), N: 10})
	}
	got = h.wholeRun(2, &model.Broadcast{StartedAt: at(0), FinishedAt: at(time.Hour - time.Second)})
	if len(got) != wholeRunPoints {
		t.Fatalf("%d points, want %d", len(got), wholeRunPoints)
	}
	for i, p := range got {
		if p.PerSecond != 2 {
			t.Fatalf("point %d: %+v, want 2/s", i, p)
		}
	}

	// Under a second: nothing (the page shows the average).
	stored = []model.SeriesPoint{{At: start, N: 200}}
	if got := h.wholeRun(3, &model.Broadcast{StartedAt: at(time.Second), FinishedAt: at(1400 * time.Millisecond)}); got != nil {
		t.Fatalf("a sub-second run drew %+v", got)
	}

	// Reopened, a final broadcast's series is the one drawn before, read
	// once; the oldest is forgotten past finishedRunsKept.
	if reads != 3 {
		t.Fatalf("%d reads of the stored rate, want 3", reads)
	}
	if again := h.wholeRun(2, &model.Broadcast{StartedAt: at(0), FinishedAt: at(time.Hour - time.Second)}); len(again) != wholeRunPoints || reads != 3 {
		t.Fatalf("reopened: %d points after %d reads, want %d points and no read", len(again), reads, wholeRunPoints)
	}
	if again := h.wholeRun(3, &model.Broadcast{StartedAt: at(time.Second), FinishedAt: at(1400 * time.Millisecond)}); again != nil || reads != 3 {
		t.Fatalf("reopened sub-second run: %+v after %d reads", again, reads)
	}
	for id := uint64(100); id < 100+finishedRunsKept; id++ {
		h.wholeRun(id, &model.Broadcast{StartedAt: at(time.Second), FinishedAt: at(1400 * time.Millisecond)})
	}
	h.wholeRun(1, &model.Broadcast{StartedAt: at(time.Second), FinishedAt: at(29 * time.Second)})
	if want := 3 + finishedRunsKept + 1; reads != want {
		t.Fatalf("%d reads, want %d (the first broadcast forgotten and read again)", reads, want)
	}

	// Ended a moment ago, a late holder may still add to its rate: read
	// again at each opening until it has settled.
	before := reads
	justNow := time.Now()
	for range 2 {
		h.wholeRun(9999, &model.Broadcast{StartedAt: at(0), FinishedAt: &justNow})
	}
	if reads != before+2 {
		t.Fatalf("a broadcast ended just now read %d times for two openings, want 2 (not kept before it settles)", reads-before)
	}
}
