package reads

import (
	"context"
	"time"

	"pushfan/broadcast/plan"
	"pushfan/broadcast/rules"
	"pushfan/model"
)

// Wait blocks until the broadcast is final, ctx ends or the service stops
// (Options.Stopped); it reports whether the broadcast is final. Any
// instance may be running it: the row is the truth. When ctx has a
// deadline that the broadcast cannot make (see cannotFinishBy), it
// returns at once instead of holding the caller for nothing.
func (r *Reader) Wait(ctx context.Context, id uint64) (bool, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := r.Get(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if b.Status.Final() {
			return true, nil
		}
		if deadline, ok := ctx.Deadline(); ok && cannotFinishBy(b, deadline, r.now(), r.opt.Rules.RateLimit) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-r.opt.Stopped.Done():
			return false, nil
		case <-t.C:
		}
	}
}

// cannotFinishBy reports whether b, not final, surely cannot finish by
// deadline: it is scheduled or held; some of its targets wait for a later
// instant (local time, quiet hours), or all of them do (a send_at_local
// due in the earliest zone, UTC+14, after the deadline); its deliver_over
// ends after it; or the targets counted so far take longer than is left
// at its max_rate or the project's budget. A canceled one always can.
func cannotFinishBy(b *model.Broadcast, deadline, now time.Time, budget float64) bool {
	if b.CancelRequested {
		return false // a cancel ends it at its chunks' next checkpoints
	}
	if b.Status == model.StatusScheduled || b.Status == model.StatusHeld || b.Waiting > 0 {
		return true
	}
	if l := b.Audience.Local; l != nil && l.At != "" {
		if w, err := time.Parse(plan.LocalLayout, l.At); err == nil && w.Add(-rules.EarliestZone).After(deadline) {
			return true
		}
	}
	start := b.CreatedAt
	if b.StartedAt != nil {
		start = *b.StartedAt
	}
	if b.DeliverOver > 0 && start.Add(b.DeliverOver).After(deadline) {
		return true
	}
	limit := budget
	if b.MaxRate > 0 && (limit <= 0 || b.MaxRate < limit) {
		limit = b.MaxRate
	}
	left := b.Targeted - b.Succeeded - b.Failed - b.Canceled
	return limit > 0 && left > 0 && now.Add(time.Duration(float64(left)/limit*float64(time.Second))).After(deadline)
}
