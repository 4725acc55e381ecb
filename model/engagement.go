package model

import "time"

// EventType is what an app reports about a push it got.
type EventType uint8

// The event types, as stored (engagement_events.type).
const (
	EventReceived EventType = iota + 1
	EventOpened
	EventClicked
	EventDismissed
)

// EventTypes are every event type, in funnel order.
var EventTypes = [...]EventType{EventReceived, EventOpened, EventClicked, EventDismissed}

// String is the type's name in the API.
func (t EventType) String() string {
	switch t {
	case EventReceived:
		return "received"
	case EventOpened:
		return "opened"
	case EventClicked:
		return "clicked"
	case EventDismissed:
		return "dismissed"
	}
	return "unknown"
}

// ParseEventType reads a type's API name.
func ParseEventType(s string) (EventType, bool) {
	for _, t := range EventTypes {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// EngagementEvent is one verified event of one target of a broadcast.
type EngagementEvent struct {
	BroadcastID uint64
	Target      uint64 // the target's cursor (token row id with the bundled tables)
	UserID      uint64
	Type        EventType
	Variant     int // A/B variant, from 1 (0: none)
	Localized   int // localized variant, from 1, the default last (0: none)
	// Platform is the target's platform (one of Platforms) as its token
	// carried it; "" when the token did not (signed before pushfan put
	// it there): the event is counted under no platform.
	Platform string
	Sent     time.Time
	At       time.Time
}

// EventResult is what storing one event did.
type EventResult uint8

// Event results.
const (
	EventStored           EventResult = iota // new: counted
	EventDuplicate                           // that target's event of that type was already counted
	EventUnknownBroadcast                    // no such broadcast (never, or deleted by retention)
)

// Engagement is a broadcast's funnel after FCM accepted its sends:
// distinct targets per event type.
type Engagement struct {
	Received, Opened, Clicked, Dismissed int64
	// TimeToOpenP50 and P90 are from send to open (nil before any open).
	TimeToOpenP50, TimeToOpenP90 *time.Duration
	// ByVariant and ByLocalized break the counts down by A/B variant and
	// by localized variant (index 0: none / the default message).
	ByVariant   map[int]EventCounts
	ByLocalized map[int]EventCounts
}

// EventCounts are distinct targets per event type.
type EventCounts struct {
	Received, Opened, Clicked, Dismissed int64
}

// Add adds n targets of type t.
func (c *EventCounts) Add(t EventType, n int64) {
	switch t {
	case EventReceived:
		c.Received += n
	case EventOpened:
		c.Opened += n
	case EventClicked:
		c.Clicked += n
	case EventDismissed:
		c.Dismissed += n
	}
}

// SeriesPoint is the events of one type in one time bucket.
type SeriesPoint struct {
	At   time.Time
	Type EventType
	N    int64
}

// EventKey is a key that signs event tokens.
type EventKey struct {
	ID     string
	Secret []byte
}
