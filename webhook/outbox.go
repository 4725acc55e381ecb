package webhook

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"time"
)

// MaxBody caps an event's body: a receiver must not be handed megabytes,
// and a batch of invalidated tokens splits long before it (TokensPerEvent).
const MaxBody = 1 << 20

// TokensPerEvent is the most dead tokens one tokens.invalidated event
// lists; more split into several events.
const TokensPerEvent = 1000

// Outbox writes events for the endpoints that want them, inside the
// caller's transaction: the state change and its event commit together or
// not at all.
type Outbox struct {
	endpoints []*Endpoint
	now       func() time.Time
}

// NewOutbox writes events for endpoints (none: Add does nothing).
func NewOutbox(endpoints []*Endpoint) *Outbox {
	return &Outbox{endpoints: endpoints, now: time.Now}
}

// Wants reports whether an endpoint takes events of type t (a caller may
// skip building an event nobody wants).
func (o *Outbox) Wants(t string) bool {
	if o == nil {
		return false
	}
	for _, e := range o.endpoints {
		if e.Wants(t) {
			return true
		}
	}
	return false
}

// envelope is an event's body: Standard Webhooks' {type, timestamp, data}.
type envelope struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// Add writes an event of type t about broadcast id (0: none) with data, in
// tx, once for every endpoint that wants it, each with its own webhook-id.
func (o *Outbox) Add(ctx context.Context, tx *sql.Tx, t string, broadcastID uint64, data any) error {
	if !o.Wants(t) {
		return nil
	}
	body, err := json.Marshal(envelope{Type: t, Timestamp: o.now().UTC(), Data: data})
	if err != nil {
		return fmt.Errorf("webhook: encoding %s: %w", t, err)
	}
	if len(body) > MaxBody {
		return fmt.Errorf("webhook: a %s event of %d bytes is over the %d-byte cap", t, len(body), MaxBody)
	}
	var bid any
	if broadcastID != 0 {
		bid = broadcastID
	}
	for _, e := range o.endpoints {
		if !e.Wants(t) {
			continue
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body) VALUES (?, ?, ?, ?, ?)",
			newMsgID(), e.Name, t, bid, body); err != nil {
			return fmt.Errorf("webhook: writing %s for %s: %w", t, e.Name, err)
		}
	}
	return nil
}

// DeadToken is one token of a tokens.invalidated event.
type DeadToken struct {
	TokenID uint64 `json:"token_id"`
	UserID  uint64 `json:"user_id"`
	Code    string `json:"code"`
}

// AddInvalidated writes tokens.invalidated events for broadcast id's dead
// tokens, TokensPerEvent at most each.
func (o *Outbox) AddInvalidated(ctx context.Context, tx *sql.Tx, broadcastID uint64, dead []DeadToken) error {
	if !o.Wants(TokensInvalidated) {
		return nil
	}
	for len(dead) > 0 {
		n := min(len(dead), TokensPerEvent)
		if err := o.Add(ctx, tx, TokensInvalidated, broadcastID, map[string]any{"broadcast_id": broadcastID, "tokens": dead[:n]}); err != nil {
			return err
		}
		dead = dead[n:]
	}
	return nil
}

// newMsgID is a webhook-id: "msg_" and 128 random bits.
func newMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "msg_" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
}
