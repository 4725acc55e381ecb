package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
	"pushfan/model"
)

// A console page watching a broadcast gets its state pushed, as
// server-sent events, from a watchHub: one poller per watched broadcast
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
	Broadcast broadcastView `json:"broadcast"`
	Series    []ratePoint   `json:"series"`
}

// watchHub fans one poll per broadcast out to its viewers.
type watchHub struct {
	peek  func(context.Context, uint64) (*model.Broadcast, error)
	view  func(*model.Broadcast) broadcastView
	every time.Duration
	log   *slog.Logger
	// history, if set, is the stored series (sends per bucket) a poller
	// starts from, so that a page opened on a running broadcast draws its
	// last two minutes at once.
	history func(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

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

func newWatchHub(peek func(context.Context, uint64) (*model.Broadcast, error), view func(*model.Broadcast) broadcastView, log *slog.Logger) *watchHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchHub{peek: peek, view: view, every: watchTick, log: log, ctx: ctx, cancel: cancel,
		watched: map[uint64]*watched{}, bySession: map[[32]byte]map[chan struct{}]struct{}{}}
}

// subscribe adds a viewer of broadcast id. The channel carries encoded
// events, the latest only (a slow viewer skips ticks, never blocks the
// others), and is closed after the final event or when the hub stops.
// ok is false once the hub has stopped.
func (h *watchHub) subscribe(id uint64) (events <-chan []byte, leave func(), ok bool) {
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

// onSignOut returns a channel closed when session idHash signs out on
// this instance (endSession), and a func to call when the stream ends.
func (h *watchHub) onSignOut(idHash [32]byte) (<-chan struct{}, func()) {
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

// endSession ends the streams of session idHash on this instance.
func (h *watchHub) endSession(idHash [32]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.bySession[idHash] {
		close(ch)
	}
	delete(h.bySession, idHash)
}

// poll reads broadcast id every tick while it has viewers and is not
// final.
func (h *watchHub) poll(id uint64) {
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
		case errors.Is(err, broadcast.ErrNotFound):
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
func (h *watchHub) unwatched(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unwatchedLocked(id)
}

func (h *watchHub) unwatchedLocked(id uint64) bool {
	if len(h.watched[id].viewers) == 0 {
		delete(h.watched, id)
		return true
	}
	return false
}

// publish hands ev to id's viewers. It reports whether polling goes on:
// not after the final event, nor once the last viewer has left.
func (h *watchHub) publish(id uint64, ev []byte, final bool) bool {
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

func (h *watchHub) end(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(id)
}

func (h *watchHub) endLocked(id uint64) {
	if w := h.watched[id]; w != nil {
		for ch := range w.viewers {
			close(ch)
		}
		delete(h.watched, id)
	}
}

// stop ends every stream and waits for the pollers, at most until ctx
// ends. Safe twice.
func (h *watchHub) stop(ctx context.Context) error {
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

// watchBroadcast streams a broadcast's state as server-sent events
// (GET /push/broadcasts/{id}/events): an event "state" about once a
// second, the last one when it is final, then the stream ends.
func (s *Server) watchBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	b, err := s.reads.Peek(ctx, id) // an unknown id is a 404, before the stream starts
	if err != nil {
		return err
	}
	w := c.Response()
	rc := http.NewResponseController(w)
	// A stream outlives PUSHFAN_HTTP_READ_TIMEOUT. Go 1.26's server does
	// not cancel a streaming handler at the read deadline (checked; the
	// test runs a stream past a 1 s timeout), but nothing documents that:
	// the deadline is cleared.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	send := func(data []byte) (err error) {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWrite)) // not every writer has one
		if data == nil {
			_, err = fmt.Fprint(w, ": ping\n\n")
		} else {
			_, err = fmt.Fprintf(w, "event: state\ndata: %s\n\n", data)
		}
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	if b.Status.Final() {
		ev, err := json.Marshal(watchEvent{Broadcast: s.view(b), Series: []ratePoint{}})
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		return send(ev)
	}
	events, leave, ok := s.watch.subscribe(id)
	if !ok {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "this instance is shutting down; reconnect"}
	}
	defer leave()
	// A console session's stream ends with the session: when it expires,
	// when it signs out (at once here, at the next ping elsewhere), and
	// when its token goes (at the next ping).
	var expired <-chan time.Time
	var signedOut <-chan struct{}
	sess, _ := c.Get(sessionKey).(*model.Session)
	if sess != nil {
		t := time.NewTimer(time.Until(sess.ExpiresAt))
		defer t.Stop()
		expired = t.C
		var forget func()
		signedOut, forget = s.watch.onSignOut(sess.IDHash)
		defer forget()
	}
	w.WriteHeader(http.StatusOK)
	if err := send(nil); err != nil {
		return nil // the viewer has gone
	}
	ping := time.NewTicker(watchPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return nil
		case <-signedOut:
			return nil
		case ev, open := <-events:
			if !open {
				return nil
			}
			if send(ev) != nil {
				return nil
			}
		case <-ping.C:
			if sess != nil {
				if live, t, err := s.session(c); err == nil && (live == nil || t == nil) {
					return nil
				}
			}
			if send(nil) != nil {
				return nil
			}
		}
	}
}

// backfill is the series a new poller starts from: the stored outcomes of
// the last watchSeries seconds, each bucket spread evenly over its
// seconds; the bucket still filling is left to the live samples.
func (h *watchHub) backfill(id uint64) []ratePoint {
	if h.history == nil {
		return nil
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	points, width, err := h.history(ctx, id, now.Add(-watchSeries*time.Second))
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
