// Package live pushes a broadcast's progress to the console pages that
// watch it, as server-sent events: a Hub polls each watched broadcast once
// a tick for all its viewers, and Serve writes one viewer's stream.
package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pushfan/model"
	"pushfan/server/view"
)

// A console page watching a broadcast gets its state pushed, as
// server-sent events, from a Hub: one poller per watched broadcast
// on this instance reads the row once a tick and hands the same encoded
// event to every viewer. A hundred open tabs cost one read a second, not a
// hundred; and the poller keeps the sends-per-second series, so a page
// opened late still draws the last two minutes.

const (
	watchTick   = time.Second
	watchSeries = 120 // points kept: two minutes at one a tick
	// watchPing keeps idle streams (a scheduled broadcast) open through
	// proxies that close silent connections.
	watchPing = 15 * time.Second
	// watchWrite bounds each write to a viewer: a stalled one is dropped.
	watchWrite = 10 * time.Second
)

type ratePoint struct {
	At        time.Time `json:"at"`
	PerSecond float64   `json:"per_second"`
}

type watchEvent struct {
	Broadcast view.Broadcast `json:"broadcast"`
	Series    []ratePoint    `json:"series"`
}

// Hub fans one poll per broadcast out to its viewers.
type Hub struct {
	peek  func(context.Context, uint64) (*model.Broadcast, error)
	view  func(*model.Broadcast) view.Broadcast
	every time.Duration
	log   *slog.Logger
	// notFound is the error peek answers (wrapped) for a broadcast that
	// is gone: its streams end.
	notFound error
	// History, if set, is the stored series (sends per bucket) a poller
	// starts from, so that a page opened on a running broadcast draws its
	// last two minutes at once. Set it before the first Subscribe.
	History func(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// finished: the drawn series of recent final broadcasts (runs.go).
	finished finishedRuns

	mu      sync.Mutex
	stopped bool
	watched map[uint64]*watched
	// bySession: the streams of each console session, ended at once when
	// it signs out here (elsewhere at their next ping).
	bySession map[[32]byte]map[chan struct{}]struct{}
}

type watched struct {
	viewers map[chan []byte]struct{}
	last    []byte // the latest event, for a viewer who joins between ticks
}

// New is a hub that reads a broadcast with peek (which answers notFound,
// wrapped, for one that is gone) and renders it with render.
func New(peek func(context.Context, uint64) (*model.Broadcast, error), render func(*model.Broadcast) view.Broadcast, notFound error, log *slog.Logger) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{peek: peek, view: render, notFound: notFound, every: watchTick, log: log, ctx: ctx, cancel: cancel,
		watched: map[uint64]*watched{}, bySession: map[[32]byte]map[chan struct{}]struct{}{}}
}

// Subscribe adds a viewer of broadcast id. The channel carries encoded
// events, the latest only (a slow viewer skips ticks, never blocks the
// others), and is closed after the final event or when the hub stops.
// ok is false once the hub has stopped.
func (h *Hub) Subscribe(id uint64) (events <-chan []byte, leave func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, nil, false
	}
	w := h.watched[id]
	if w == nil {
		w = &watched{viewers: map[chan []byte]struct{}{}}
		h.watched[id] = w
		h.wg.Add(1)
		go h.poll(id)
	}
	ch := make(chan []byte, 1)
	if w.last != nil {
		ch <- w.last
	}
	w.viewers[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(w.viewers, ch)
	}, true
}

// OnSignOut returns a channel closed when session idHash signs out on
// this instance (EndSession), and a func to call when the stream ends.
func (h *Hub) OnSignOut(idHash [32]byte) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	if h.bySession[idHash] == nil {
		h.bySession[idHash] = map[chan struct{}]struct{}{}
	}
	h.bySession[idHash][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, open := h.bySession[idHash][ch]; open {
			delete(h.bySession[idHash], ch)
			if len(h.bySession[idHash]) == 0 {
				delete(h.bySession, idHash)
			}
		}
	}
}

// EndSession ends the streams of session idHash on this instance.
func (h *Hub) EndSession(idHash [32]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.bySession[idHash] {
		close(ch)
	}
	delete(h.bySession, idHash)
}

// poll reads broadcast id every tick while it has viewers and is not
// final.
func (h *Hub) poll(id uint64) {
	defer h.wg.Done()
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	series := h.backfill(id)
	prevDone, prevAt := int64(-1), time.Time{}
	for {
		b, err := h.peek(h.ctx, id)
		switch {
		case h.ctx.Err() != nil:
			h.end(id)
			return
		case errors.Is(err, h.notFound):
			h.end(id) // removed by retention while watched
			return
		case err != nil:
			// The database will answer again; the viewers keep the last
			// state meanwhile (and nobody watching ends the poller).
			h.log.Warn("watch: reading the broadcast failed", "broadcast_id", id, "err", err)
			if h.unwatched(id) {
				return
			}
		default:
			now := time.Now()
			done := b.Succeeded + b.Failed
			if prevDone >= 0 && now.After(prevAt) {
				series = append(series, ratePoint{At: now.UTC(), PerSecond: float64(done-prevDone) / now.Sub(prevAt).Seconds()})
				if len(series) > watchSeries {
					series = series[len(series)-watchSeries:]
				}
			}
			prevDone, prevAt = done, now
			ev, err := json.Marshal(watchEvent{Broadcast: h.view(b), Series: series})
			if err != nil {
				h.log.Error("watch: encoding the event", "broadcast_id", id, "err", err)
				h.end(id)
				return
			}
			if !h.publish(id, ev, b.Status.Final()) {
				return
			}
		}
		select {
		case <-h.ctx.Done():
			h.end(id)
			return
		case <-tick.C:
		}
	}
}

// unwatched drops id, reporting true, once its last viewer has left.
func (h *Hub) unwatched(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unwatchedLocked(id)
}

func (h *Hub) unwatchedLocked(id uint64) bool {
	if len(h.watched[id].viewers) == 0 {
		delete(h.watched, id)
		return true
	}
	return false
}

// publish hands ev to id's viewers. It reports whether polling goes on:
// not after the final event, nor once the last viewer has left.
func (h *Hub) publish(id uint64, ev []byte, final bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unwatchedLocked(id) {
		return false
	}
	w := h.watched[id]
	w.last = ev
	for ch := range w.viewers {
		select { // replace an event the viewer has not taken yet
		case <-ch:
		default:
		}
		ch <- ev // cannot block: emptied above, and only the hub sends
	}
	if final {
		h.endLocked(id)
		return false
	}
	return true
}

func (h *Hub) end(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(id)
}

func (h *Hub) endLocked(id uint64) {
	if w := h.watched[id]; w != nil {
		for ch := range w.viewers {
			close(ch)
		}
		delete(h.watched, id)
	}
}

// Stop ends every stream and waits for the pollers, at most until ctx
// ends. Safe twice.
func (h *Hub) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.cancel()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watch streams: %w", ctx.Err())
	}
}

// wholeRunPoints bounds a finished broadcast's series: a longer run is
// drawn in wider steps, each the average of the buckets it covers.
const wholeRunPoints = 240

// wholeRun is a final broadcast's stored send rate from its start to its
// end, a point per bucket (zero where nothing was sent), merged into
// wider steps when there are more than wholeRunPoints. A run shorter than
// two buckets has none: the page then shows the average from the counts
// and the duration. The series is kept (finishedRuns): it is read once.
func (h *Hub) wholeRun(id uint64, b *model.Broadcast) []ratePoint {
	if h.History == nil || b.StartedAt == nil {
		return nil
	}
	if s, ok := h.finished.get(id); ok {
		return s
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	points, width, err := h.History(ctx, id, b.StartedAt.Add(-historyMargin))
	if err != nil {
		h.log.Warn("watch: reading the stored send rate failed; the chart shows the average only", "broadcast_id", id, "err", err)
		return nil
	}
	var series []ratePoint
	// Shorter than two buckets: a bucket's rate would spread a burst over
	// seconds that had none; the average says it truly (no series).
	if b.FinishedAt == nil || b.FinishedAt.Sub(*b.StartedAt) >= 2*width {
		series = spread(points, width, b.StartedAt.Truncate(width), b.FinishedAt)
	}
	if b.FinishedAt != nil && time.Since(*b.FinishedAt) > settled {
		h.finished.put(id, series)
	}
	return series
}

// settled is how long after its end a final broadcast's send rate is
// taken as settled and kept (finishedRuns): a holder late past its lease
// (its instance stalled) still adds its checkpoint's sends to the rate
// after the broadcast is final (lease, latecheckpoint.go). Leases are
// seconds to a minute; a late holder's checkpoint comes within one.
const settled = 5 * time.Minute

// historyMargin reaches back before the start for the bucket the start
// falls in (buckets are a few seconds wide).
const historyMargin = time.Minute

// spread turns stored buckets from first (a bucket start) to end into
// rate points, a missing bucket as zero, at most wholeRunPoints of them.
func spread(points []model.SeriesPoint, width time.Duration, first time.Time, end *time.Time) []ratePoint {
	if width <= 0 || len(points) == 0 {
		return nil
	}
	last := points[len(points)-1].At
	if end != nil && end.Truncate(width).After(last) {
		last = end.Truncate(width)
	}
	if points[0].At.Before(first) {
		first = points[0].At
	}
	n := int(last.Sub(first)/width) + 1
	step := (n + wholeRunPoints - 1) / wholeRunPoints // buckets a point
	sums := make([]int64, (n+step-1)/step)
	for _, p := range points {
		if i := int(p.At.Sub(first) / width); i >= 0 && i < n {
			sums[i/step] += p.N
		}
	}
	out := make([]ratePoint, len(sums))
	for i, sum := range sums {
		buckets := min(step, n-i*step)
		out[i] = ratePoint{
			At:        first.Add(time.Duration(i*step+buckets) * width).UTC(),
			PerSecond: float64(sum) / (time.Duration(buckets) * width).Seconds(),
		}
	}
	return out
}

// backfill is the series a new poller starts from: the stored outcomes of
// the last watchSeries seconds, each bucket spread evenly over its
// seconds; the bucket still filling is left to the live samples.
func (h *Hub) backfill(id uint64) []ratePoint {
	if h.History == nil {
		return nil
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	points, width, err := h.History(ctx, id, now.Add(-watchSeries*time.Second))
	if err != nil {
		h.log.Warn("watch: reading the stored send rate failed; the chart starts empty", "broadcast_id", id, "err", err)
		return nil
	}
	var out []ratePoint
	secs := int(width / time.Second)
	for _, p := range points {
		if p.At.Add(width).After(now) || secs < 1 {
			continue
		}
		for k := range secs {
			out = append(out, ratePoint{At: p.At.Add(time.Duration(k+1) * time.Second), PerSecond: float64(p.N) / float64(secs)})
		}
	}
	return out[max(0, len(out)-watchSeries):]
}
