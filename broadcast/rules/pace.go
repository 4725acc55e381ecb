package rules

import (
	"math"
	"time"

	"pushfan/model"
)

// MaxDeliverOver bounds deliver_over: a broadcast spread wider than a week
// is a schedule, not a pace.
const MaxDeliverOver = 7 * 24 * time.Hour

// Class is the scheduling class a broadcast of spec (its class and pace)
// to audience a gets, or the *FieldError of a class or pace the rules
// refuse.
func (r Rules) Class(spec Spec, a model.Audience) (string, error) {
	p, err := r.pacing(spec, a)
	return p.class, err
}

type pacing struct {
	class       string
	maxRate     float64
	deliverOver time.Duration
}

// pacing checks the class and the pace against the budget. A user_ids
// audience is counted already, so a pace it cannot keep is refused here;
// for the others the broadcast goes as fast as the budget allows and its
// expected finish says when.
func (r Rules) pacing(spec Spec, a model.Audience) (pacing, error) {
	var p pacing
	if spec.MaxRate != nil {
		switch v := *spec.MaxRate; {
		case math.IsNaN(v) || v <= 0:
			return p, fieldError("invalid_value", "max_rate", "max_rate must be a positive number of messages a second, got %v", v)
		case v > r.RateLimit:
			return p, fieldError("max_rate_over_budget", "max_rate", "max_rate %v is over the project's budget of %v messages a second (PUSHFAN_RATE_LIMIT, shared by every instance)", v, r.RateLimit)
		}
		p.maxRate = *spec.MaxRate
	}
	if spec.DeliverOver != "" {
		d, err := time.ParseDuration(spec.DeliverOver)
		switch {
		case err != nil:
			return p, fieldError("invalid_value", "deliver_over", "deliver_over must be a duration such as \"30m\" or \"2h\", got %q", spec.DeliverOver)
		case d < time.Second || d > MaxDeliverOver:
			return p, fieldError("invalid_value", "deliver_over", "deliver_over must be between 1s and %v, got %v", MaxDeliverOver, d)
		}
		p.deliverOver = d
	}
	if n := len(a.UserIDs); n > 0 {
		// At least one token a user: a lower bound on the sends.
		if p.deliverOver > 0 && float64(n)/p.deliverOver.Seconds() > r.RateLimit {
			return p, fieldError("deliver_over_too_short", "deliver_over", "%d users cannot be reached in %v within the budget of %v messages a second", n, p.deliverOver, r.RateLimit)
		}
		if p.deliverOver > 0 && p.maxRate > 0 && float64(n) > p.maxRate*p.deliverOver.Seconds() {
			return p, fieldError("deliver_over_too_short", "deliver_over", "%d users cannot be reached in %v at max_rate %v", n, p.deliverOver, p.maxRate)
		}
	}
	paced := p.maxRate > 0 || p.deliverOver > 0
	switch spec.Class {
	case "":
		p.class = model.ClassBulk
		if n := len(a.UserIDs); n > 0 && n <= r.TransactionalUsers && !paced {
			p.class = model.ClassTransactional
		}
	case model.ClassTransactional:
		if paced {
			return p, fieldError("invalid_value", "class", "a transactional broadcast goes first and as fast as it can: it cannot be paced (drop max_rate and deliver_over, or use class bulk)")
		}
		p.class = spec.Class
	case model.ClassBulk:
		p.class = spec.Class
	default:
		return p, fieldError("invalid_value", "class", "class must be %q or %q, got %q (the scheduling class, not FCM's message priority)", model.ClassTransactional, model.ClassBulk, spec.Class)
	}
	return p, nil
}
