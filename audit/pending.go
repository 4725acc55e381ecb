package audit

import (
	"context"
	"encoding/json"
	"sync"

	"pushfan/model"
)

// pending is the entry a request will record, shared by its handler and
// the domain code it calls (through the context).
type pending struct {
	mu    sync.Mutex
	entry model.AuditEntry
	// detail is the entry's detail object, marshalled when written.
	detail map[string]any
	// createdKind and createdID name what the change made (Created).
	createdKind, createdID string
	// written is set once Write inserted the entry in a transaction;
	// that transaction may still roll back, but then the request fails
	// (or runs the transaction again, writing it again).
	written bool
}

type pendingKey struct{}

// WithPending returns ctx carrying e, the entry its request will record.
func WithPending(ctx context.Context, e model.AuditEntry) context.Context {
	return context.WithValue(ctx, pendingKey{}, &pending{entry: e})
}

func from(ctx context.Context) *pending {
	p, _ := ctx.Value(pendingKey{}).(*pending)
	return p
}

// Created names what the change made, kind and id ("broadcast", "42"):
// the entry's target when the route named none, else a detail beside it
// (a resend's target is the original broadcast, a job fire's the job).
// Called again (a transaction run again after a deadlock makes a new
// row), the last call wins.
func Created(ctx context.Context, kind, id string) {
	if p := from(ctx); p != nil {
		p.mu.Lock()
		p.createdKind, p.createdID = kind, id
		p.mu.Unlock()
	}
}

// SetDetail adds key to the pending entry's detail object.
func SetDetail(ctx context.Context, key string, v any) {
	if p := from(ctx); p != nil {
		p.mu.Lock()
		p.setDetail(key, v)
		p.mu.Unlock()
	}
}

func (p *pending) setDetail(key string, v any) {
	if p.detail == nil {
		p.detail = map[string]any{}
	}
	p.detail[key] = v
}

// Pending returns the entry ctx's request will record, with its detail,
// and whether Write already inserted it in a change's transaction; ok is
// false when ctx carries none.
func Pending(ctx context.Context) (e model.AuditEntry, written, ok bool) {
	p := from(ctx)
	if p == nil {
		return model.AuditEntry{}, false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.complete(), p.written, true
}

// SetActor names who acts, for a route that learns it in its handler (a
// sign-out reads the session it ends).
func SetActor(ctx context.Context, a model.Actor) {
	if p := from(ctx); p != nil {
		p.mu.Lock()
		p.entry.Actor = a
		p.mu.Unlock()
	}
}

// complete is the entry with what the change made and its detail
// encoded (p.mu held).
func (p *pending) complete() model.AuditEntry {
	e := p.entry
	detail := p.detail
	if p.createdKind != "" {
		if e.Target == "" {
			e.Target = p.createdKind + ":" + p.createdID
		} else {
			detail = make(map[string]any, len(p.detail)+1)
			for k, v := range p.detail {
				detail[k] = v
			}
			detail[p.createdKind] = p.createdID
		}
	}
	if len(detail) > 0 {
		if b, err := json.Marshal(detail); err == nil {
			e.Detail = b
		}
	}
	return e
}
