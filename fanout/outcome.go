package fanout

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Class is what the engine does with an outcome.
type Class uint8

const (
	// Success: the message was accepted.
	Success Class = iota
	// Dead: the token will never work again. Never retried; invalidated.
	Dead
	// Transient: worth another attempt later (quota, unavailability, a
	// network error, the per-send timeout).
	Transient
	// Fatal: every other token would fail the same way (bad credentials, a
	// malformed message). The run stops early.
	Fatal
	// Rejected: this target cannot be sent (its personalized message does
	// not render); the token is fine, nothing is retried.
	Rejected
)

func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Dead:
		return "dead"
	case Transient:
		return "transient"
	case Fatal:
		return "fatal"
	case Rejected:
		return "rejected"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Codes the engine itself gives or acts on. A Sender adds its own (FCM's
// UNREGISTERED, ...).
const (
	// CodeQuota is the project's quota: a Transient outcome with it pauses
	// every worker until its RetryAfter, not just the one that got it.
	CodeQuota    = "QUOTA_EXCEEDED"
	CodeTimeout  = "TIMEOUT"        // the per-send timeout expired
	CodePanic    = "SENDER_PANIC"   // the Sender panicked
	CodeTemplate = "TEMPLATE_ERROR" // the personalized message did not render
	CodeMessage  = "MESSAGE_ERROR"  // the Sender could not prepare the message
)

// Outcome is one attempt's result, classified by the Sender.
type Outcome struct {
	Class      Class
	Code       string        // "" on success
	RetryAfter time.Duration // the server's requested wait, 0 if none
	Detail     string        // a human-readable reason
	// Requests is how many requests the attempt made (a Sender that
	// retries by itself may make several); 0 counts as one.
	Requests int
	// MessageID is FCM's name for an accepted message
	// ("projects/P/messages/ID"), on success; what an operator quotes to
	// Firebase support about one delivery.
	MessageID string
}

// Budget is how many requests a token may still cost: Used so far, Max in
// all. A Sender that retries by itself must not go past Max.
type Budget struct{ Used, Max int }

// Sender delivers messages. Prepare is called once per message (once per
// run, or once per target for personalized messages), so that whatever is
// the same for every token is done once.
type Sender interface {
	Prepare(msg *Message) (Prepared, error)
}

// Prepared sends one prepared message to tokens, from many goroutines.
type Prepared interface {
	// Send makes one attempt at token and classifies its result. ctx ends
	// when the per-send timeout does; Send then returns promptly.
	Send(ctx context.Context, token string, b Budget) Outcome
}

// TaggedPrepared is a Prepared that can also put a per-send value where a
// Tagged message holds TagPlaceholder (the signed event token of package
// engagement), without preparing the message again. A Prepared that is not
// one cannot run a Job with a Tag.
type TaggedPrepared interface {
	Prepared
	SendTagged(ctx context.Context, token, tag string, b Budget) Outcome
}

// StartingPrepared is a TaggedPrepared whose send is made in two calls:
// StartTagged hands the request to the wire and returns, and the Pending's
// Wait returns the outcome. The engine waits from a shallow frame, so that
// the thousands of workers parked on an answer keep small stacks (a worker
// parked at the bottom of the send path holds an 8 KB stack; see
// docs/PERFORMANCE.md, "Memory").
type StartingPrepared interface {
	TaggedPrepared
	// StartTagged is SendTagged's first half; tag is "" for an untagged
	// message. The engine calls Wait on the result exactly once, with the
	// same ctx.
	StartTagged(ctx context.Context, token, tag string, b Budget) Pending
}

// Pending is a send under way (StartingPrepared).
type Pending interface {
	Wait(ctx context.Context) Outcome
}

// ErrFatal wraps the outcome that stopped a run early.
type ErrFatal struct{ Outcome Outcome }

func (e *ErrFatal) Error() string {
	return fmt.Sprintf("broadcast stopped: FCM answered %s, which every token would get: %s", e.Outcome.Code, e.Outcome.Detail)
}
