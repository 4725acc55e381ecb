package lease

import (
	"context"
	"database/sql"
)

// Event is a transition the app is told about (package webhook): it is
// written in the transition's own transaction, so there is no transition
// without its event and no event without its transition.
type Event string

// The transitions' events.
const (
	EventStarted  Event = "broadcast.started"  // its first chunk was claimed
	EventHeld     Event = "broadcast.held"     // stored held, waiting for a release
	EventFinished Event = "broadcast.finished" // final: completed, canceled or failed
)

// Events writes the events of transitions (the app's webhook outbox).
type Events interface {
	BroadcastEvent(ctx context.Context, tx *sql.Tx, e Event, id uint64) error
}

// SetEvents has the store write its transitions' events to ev (nil:
// none). Call it before the store is used.
func (s *Store) SetEvents(ev Events) { s.events = ev }

// event writes e about broadcast id in tx, when events are wanted.
func (s *Store) event(ctx context.Context, tx *sql.Tx, e Event, id uint64) error {
	if s.events == nil {
		return nil
	}
	return s.events.BroadcastEvent(ctx, tx, e, id)
}
