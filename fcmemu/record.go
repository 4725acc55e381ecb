package fcmemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// Received is the last message a token was sent, as the emulator read it:
// its notification, its data, and the whole message object.
type Received struct {
	Title, Body string
	Data        map[string]string
	// Message is the request's "message" object as it arrived.
	Message json.RawMessage
}

// recorder keeps the last request body per token while on. It is off by
// default: the hot path then pays one atomic load, and the benchmarks no
// map of millions of bodies.
type recorder struct {
	on   atomic.Bool
	mu   sync.Mutex
	last map[string][]byte
}

// RecordMessages makes the emulator keep, from now on, the last message
// each token was sent (whatever the answer was), for LastMessage. Tests
// that check content turn it on; Reset forgets what it kept.
func (e *Emulator) RecordMessages() { e.received.on.Store(true) }

// LastMessage returns the last message recorded for token, and false when
// none was (recording off, or nothing sent to it).
func (e *Emulator) LastMessage(token string) (Received, bool, error) {
	e.received.mu.Lock()
	raw, ok := e.received.last[token]
	e.received.mu.Unlock()
	if !ok {
		return Received{}, false, nil
	}
	var req struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return Received{}, true, fmt.Errorf("fcmemu: recorded body for %s: %w", token, err)
	}
	var m struct {
		Notification struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"notification"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(req.Message, &m); err != nil {
		return Received{}, true, fmt.Errorf("fcmemu: recorded message for %s: %w", token, err)
	}
	return Received{Title: m.Notification.Title, Body: m.Notification.Body, Data: m.Data, Message: req.Message}, true, nil
}

// note keeps body as token's last message (body is a pooled buffer: copied).
func (r *recorder) note(p *parsedSend, body []byte) {
	if !r.on.Load() || !p.hasToken {
		return
	}
	kept := bytes.Clone(body)
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string][]byte{}
	}
	r.last[p.token] = kept
	r.mu.Unlock()
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.last = nil
	r.mu.Unlock()
}
