package fcmemu

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// recorder keeps the last message object received for each token, for tests
// that check what a client really sent (FCM's own view of a message). It is
// off unless RecordMessages is called: a load test's million tokens would
// otherwise hold a million bodies.
type recorder struct {
	on   atomic.Bool // read on every request without the lock
	mu   sync.Mutex
	last map[string]json.RawMessage
}

// RecordMessages starts keeping the last message per token (see
// LastMessage). Requests already answered are not recorded.
func (e *Emulator) RecordMessages() {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	if e.rec.last == nil {
		e.rec.last = map[string]json.RawMessage{}
	}
	e.rec.on.Store(true)
}

// LastMessage returns the "message" object of the last request naming
// token, as the client sent it (whatever the answer), and whether there was
// one since RecordMessages.
func (e *Emulator) LastMessage(token string) (json.RawMessage, bool) {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	m, ok := e.rec.last[token]
	return m, ok
}

// record keeps body's message for token when recording; body is copied,
// since it lives in a pooled buffer.
func (r *recorder) record(token string, body []byte) {
	if !r.on.Load() {
		return
	}
	var env struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(body, &env) != nil || env.Message == nil {
		return
	}
	msg := append(json.RawMessage(nil), env.Message...)
	r.mu.Lock()
	r.last[token] = msg
	r.mu.Unlock()
}

// reset forgets the recorded messages (recording stays as it was).
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil {
		r.last = map[string]json.RawMessage{}
	}
}

// Received is a recorded message's notification and data, read out of it.
type Received struct {
	Title, Body string
	Data        map[string]string
	// Message is the request's "message" object as it arrived.
	Message json.RawMessage
}

// LastNotification is LastMessage with the notification's title and body
// and the data read out of it; false when nothing was recorded for token.
func (e *Emulator) LastNotification(token string) (Received, bool, error) {
	raw, ok := e.LastMessage(token)
	if !ok {
		return Received{}, false, nil
	}
	var m struct {
		Notification struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"notification"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Received{}, true, fmt.Errorf("fcmemu: recorded message for %s: %w", token, err)
	}
	return Received{Title: m.Notification.Title, Body: m.Notification.Body, Data: m.Data, Message: raw}, true, nil
}
