package fanout

import (
	"context"
	"encoding/json"
	"time"
)

// Target is one device token of one user.
type Target struct {
	// Cursor orders the audience: Sources page by it and checkpoints store
	// it. For the built-in audiences it is the token id.
	Cursor  uint64
	TokenID uint64 // device_tokens.id; 0 when the audience does not return it
	UserID  uint64
	Token   string
	// Vars are the audience's extra columns, for personalized messages.
	Vars map[string]string
	// Locale is the user's language tag as the audience stores it ("" when
	// unknown), for localized messages (Job.Variants).
	Locale string
	// Platform is the device's platform as the sends are counted under
	// it (Committed.Platforms; "" when the Source does not read it).
	Platform string
}

// Message is what a broadcast sends to every target. It is built once per
// broadcast and shared read-only by all workers.
type Message struct {
	Title string
	Body  string
	Image string
	Data  map[string]string
	// Delivery is how FCM and the platforms treat the message where its
	// own Platform objects say nothing: priority, lifetime and the tag
	// that folds a rare duplicate on the display (package fcm).
	Delivery Delivery
	// Platform holds FCM's android, apns, webpush and fcm_options objects
	// as normalized JSON; the engine passes them on without reading them.
	Platform Platform
	// DryRun asks FCM to validate only (validate_only): nothing is delivered.
	DryRun bool
	// Tagged messages hold TagPlaceholder in their data values or their
	// web push link: each send replaces it with the Job's Tag for its
	// target (see TaggedPrepared).
	Tagged bool
}

// Delivery is a message's defaults for the way to the device and the
// display there, applied by package fcm only where the message's own
// Platform objects set nothing (a request's override always wins).
type Delivery struct {
	// DisplayTag folds copies of one broadcast on the display: Android's
	// and web push's notification tag, and APNs' apns-collapse-id (APNs
	// keeps one notification per device while it is offline anyway). It
	// never makes a message collapsible in FCM's store: Android's
	// collapse_key is set only when a request asks for one, since FCM
	// keeps at most four collapse keys per offline device.
	DisplayTag string
	// AndroidPriority is "normal" or "high" ("": FCM's default, high).
	AndroidPriority string
	// APNSPriority is apns-priority, "5" or "10" ("": APNs' default, 10).
	// A message without a notification (a background one) is sent at 5
	// whatever it says: APNs refuses 10 for those.
	APNSPriority string
	// TTL is how long FCM and the platforms keep the message for an
	// offline device (0: FCM's default, 4 weeks); apns-expiration counts
	// it from Built.
	TTL   time.Duration
	Built time.Time
}

// TagPlaceholder stands for a send's tag in a Tagged Message. No real
// message has it: '\x01' has no place in a title, data or link.
const TagPlaceholder = "\x01pushfan-tag\x01"

// Source pages the audience in ascending Cursor order.
type Source interface {
	// Page appends up to limit targets with Cursor > after to dst[:0].
	// An empty result means the audience is exhausted.
	Page(ctx context.Context, after uint64, limit int, dst []Target) ([]Target, error)
}

// Failure describes one token that ended failed.
type Failure struct {
	Target   Target
	Code     string
	Message  string
	Attempts int
	Dead     bool // the token is dead (UNREGISTERED, ...) and should be invalidated
}

// Personalizer renders the message for one target (templates over its
// Vars). An error fails the target with CodeTemplate; it is not retried.
type Personalizer func(t Target) (*Message, error)

// Pacer spreads one broadcast's targets (its max_rate or deliver_over):
// Wait blocks until the next target may go to the workers, and Rate is the
// messages a second it allows now. Runs of one broadcast on an instance
// share one.
type Pacer interface {
	Wait(ctx context.Context) error
	Rate() float64
}

// Gate holds a run's producer: Wait blocks until the next target may be
// handed to the workers. A chunk run closes it while its outcomes go
// unstored for too long (a stalled checkpoint), so that a crash repeats a
// bounded number of sends however long the database stalls.
//
// Open is checked by a worker right before it sends, once it holds its rate
// permit: a target taken from the queue while the gate was open is not sent
// after it closed (the worker waits on it, then takes a fresh permit).
type Gate interface {
	Wait(ctx context.Context) error
	Open() bool
}

// Metrics hears about every send attempt (from worker goroutines, so it
// must be cheap and safe for concurrent use). It gets plain values, so a
// metrics package needs none of the engine's types.
type Metrics interface {
	SendStarted()
	// SendDone: an attempt took d and ended in class (Class.String:
	// success, dead, transient, fatal, rejected) with code ("" on success).
	SendDone(d time.Duration, class, code string)
	Retried()
	RateWaited(d time.Duration)
	Workers(n int) // the pool's size, as the controller set it
}

type noMetrics struct{}

func (noMetrics) SendStarted()                           {}
func (noMetrics) SendDone(time.Duration, string, string) {}
func (noMetrics) Retried()                               {}
func (noMetrics) RateWaited(time.Duration)               {}
func (noMetrics) Workers(int)                            {}

// Platform is a message's FCM platform overrides, each nil when absent,
// each the REST API's JSON object (package fcm turns them into the SDK's
// types).
type Platform struct {
	Android, APNS, Webpush, FCMOptions json.RawMessage
}
