package quota

import "time"

// Limiter is the instance's rate limiter, which the Coordinator keeps at
// the instance's share of the budget (fanout.Throttle is the one pushfan
// runs). The Coordinator needs nothing else of the engine.
type Limiter interface {
	// SetLimit sets the rate, in messages a second.
	SetLimit(perSecond float64)
	// Fill gives the limiter's bucket what idle at its rate would have
	// given it: the instance starts sending with nobody else sending.
	Fill(idle time.Duration)
	// GrantUntil bounds the share: from until on no permit is given until
	// a later call; the zero time lifts the bound.
	GrantUntil(until time.Time)
	// Hold pauses sending until until, for a pause another instance
	// published.
	Hold(until time.Time)
	// OnPause installs fn, called when a 429 pauses this instance, so the
	// pause is published to the others.
	OnPause(fn func(until time.Time))
}
