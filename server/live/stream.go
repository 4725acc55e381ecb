package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"pushfan/model"
)

// ErrStopped is Serve's answer once the hub has stopped (the instance is
// shutting down), before the stream starts: the viewer reconnects
// elsewhere.
var ErrStopped = errors.New("live: the hub has stopped")

// Serve streams broadcast b's state to w as server-sent events: an event
// "state" about once a second, the last one when it is final, then the
// stream ends. sess is the viewer's console session (nil for a bearer
// token): the stream ends with it, when it expires, when it signs out
// (at once on this instance, EndSession), and when signedIn reports it
// gone (asked at each ping). An error is returned only before the stream
// starts; a viewer who goes away ends it quietly.
func (h *Hub) Serve(ctx context.Context, w http.ResponseWriter, b *model.Broadcast, sess *model.Session, signedIn func() bool) error {
	rc := http.NewResponseController(w)
	// A stream outlives PUSHFAN_HTTP_READ_TIMEOUT. Go 1.26's server does
	// not cancel a streaming handler at the read deadline (checked; the
	// test runs a stream past a 1 s timeout), but nothing documents that:
	// the deadline is cleared.
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
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
		// Its whole run's rate: a page reopened after the end still draws
		// the chart.
		series := h.wholeRun(b.ID, b)
		if series == nil {
			series = []ratePoint{}
		}
		ev, err := json.Marshal(watchEvent{Broadcast: h.view(b), Series: series})
		if err != nil {
			return fmt.Errorf("encoding the final state: %w", err)
		}
		w.WriteHeader(http.StatusOK)
		return send(ev)
	}
	events, leave, ok := h.Subscribe(b.ID)
	if !ok {
		return ErrStopped
	}
	defer leave()
	var expired <-chan time.Time
	var signedOut <-chan struct{}
	if sess != nil {
		t := time.NewTimer(time.Until(sess.ExpiresAt))
		defer t.Stop()
		expired = t.C
		var forget func()
		signedOut, forget = h.OnSignOut(sess.IDHash)
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
			if sess != nil && !signedIn() {
				return nil
			}
			if send(nil) != nil {
				return nil
			}
		}
	}
}
