package quota

import "time"

// apply sets this instance's share from the live members (see the package
// doc). A share falls at once. One that would rise because this instance's
// own demand rose (a join, or bulk sends beside its paced ones) first waits
// JoinWait, at the part its old demand had (the trickle for a join), so that
// every other sender has lowered its share; one that rises because others
// need less rises at once. JoinWait is a lower bound: the rise also waits
// until every other sender has applied a share read since it began (so has
// seen the new demand and lowered its own), however late their beats are; one
// that stops beating is counted out after Stale. read is no later than
// when the members' rows were read.
func (c *Coordinator) apply(sending bool, demand float64, others []member, read time.Time) {
	now := time.Now()
	live := len(others) + 1
	if !sending {
		// Idle: the trickle, for the first sends before the join's beat.
		c.granted, c.raising, c.confirm = 0, time.Time{}, time.Time{}
		c.setShare(c.opt.Limit*trickle, live)
		return
	}
	var rest []float64
	for _, m := range others {
		if m.sending {
			rest = append(rest, demandOf(m.demand))
		}
	}
	partFor := func(d float64) float64 { return split(c.opt.Limit, append([]float64{demandOf(d)}, rest...))[0] }
	share, count := partFor(demand), len(rest)+1
	fill := false
	if !c.confirm.IsZero() && now.After(c.confirm) {
		c.confirm = time.Time{}
	}
	switch {
	case demand <= c.granted:
		c.granted, c.raising = demand, time.Time{}
	case c.granted == 0 && len(rest) == 0:
		// A join with nobody sending: others may be joining this instant,
		// unseen. A beat soon after sees them.
		share = min(share, c.opt.Limit/float64(live))
		c.granted, c.confirm = demand, now.Add(confirmAfter)
		// Nobody sent beside it, and it was idle: its bucket holds what the
		// idle gave it (see fanout.Throttle.Fill), not the trickle's.
		fill = true
	case c.raising.IsZero() || now.Sub(c.raising) < c.opt.JoinWait || !c.madeRoom(others, read, now):
		if c.raising.IsZero() {
			c.raising = now
		}
		old := c.opt.Limit * trickle
		if c.granted > 0 {
			old = max(old, partFor(c.granted))
		}
		share = min(share, old)
	default:
		c.granted, c.raising = demand, time.Time{}
	}
	c.setShare(share, count)
	if fill {
		// Idle since its last heartbeat at least: a member leaves only
		// after an Interval without demand.
		c.throttle.Fill(c.opt.Interval)
	}
}

// madeRoom reports whether every other sender's share leaves room for this
// instance's raised demand: each has applied a share read since the raise
// began (beatSince), or the raise began more than Stale ago. Then any
// member's share was split from a read begun after the raise began, which
// saw this instance's row with its new demand, or that member's grant has
// run out (see grant). So a member whose heartbeats get written but whose
// reads keep failing (it never certifies a share, and it holds) delays a
// rise by Stale at most, never for ever.
func (c *Coordinator) madeRoom(others []member, read, now time.Time) bool {
	return beatSince(others, read.Sub(c.raising)) || now.Sub(c.raising) > c.opt.Stale
}

// beatSince reports whether every other sending member has applied a
// share computed after `since` ago (measured up to the read of their rows):
// after a raise began, when since is the time from the raise to that read.
// A member certifies a heartbeat only at the next one (applied_at), so a
// raise waits up to two of the others' heartbeats.
func beatSince(others []member, since time.Duration) bool {
	for _, m := range others {
		if m.sending && (m.applied < 0 || m.applied >= since) {
			return false
		}
	}
	return true
}

func (c *Coordinator) setShare(perSecond float64, members int) {
	c.mu.Lock()
	// Who shares the budget changes rarely and matters to an operator; a
	// paced member's part moves with its pace, every heartbeat.
	if members != c.members {
		c.log.Info("rate budget shared", "per_second", perSecond, "members", members)
	} else if perSecond != c.share {
		c.log.Debug("rate budget share", "per_second", perSecond, "members", members)
	}
	c.share, c.members = perSecond, members
	report := c.report
	c.mu.Unlock()
	c.throttle.SetLimit(perSecond)
	if report != nil {
		report(perSecond, members)
	}
}
