package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// paused is the throttle's hook for a 429 this instance got: publish it.
func (c *Coordinator) paused(until time.Time) {
	c.keepPause(until)
	select {
	case c.pausing <- struct{}{}:
	default: // the loop is woken already, and publishes the longest
	}
}

// keepPause makes until the pause to publish if it is the longest yet.
func (c *Coordinator) keepPause(until time.Time) {
	c.mu.Lock()
	if until.After(c.pause) {
		c.pause = until
	}
	c.mu.Unlock()
}

// watch is how often the loop looks at the local demand (no database): a
// change between idle and sending is heartbeaten at once, and so is the
// end of a join's wait.
const watch = 20 * time.Millisecond

// confirmAfter is when an instance that began sending with nobody else
// sending looks again: anyone who began at the same moment has stored its
// row by then (its join's heartbeat follows its first send within watch).
const confirmAfter = 80 * time.Millisecond

func (c *Coordinator) run(ctx context.Context) {
	beat := time.NewTicker(c.opt.Interval)
	defer beat.Stop()
	look := time.NewTicker(watch)
	defer look.Stop()
	c.lastBeat = time.Now()
	c.grant(c.lastBeat.Add(c.opt.Stale))
	c.beat(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.pausing:
			c.publish(ctx)
		case <-look.C:
			if c.due(time.Now()) {
				c.beat(ctx)
				beat.Reset(c.opt.Interval)
			}
		case <-beat.C:
			c.beat(ctx)
			c.publish(ctx) // a pause whose publishing failed, again
		}
	}
}

// due reports whether a heartbeat should go now, before the next regular
// one: the demand rose above what the others know (a join, or a bulk send
// beside paced ones), a raise's or a fresh join's wait is over, or this
// instance holds after a stall. Not within an Interval of a failed
// heartbeat.
func (c *Coordinator) due(now time.Time) bool {
	if now.Before(c.retryAt) {
		return false
	}
	switch d := c.demand(); {
	case now.Sub(c.lastBeat) > c.opt.Stale:
		return true
	case d > c.granted && c.raising.IsZero() && c.confirm.IsZero():
		return true
	case !c.raising.IsZero() && now.Sub(c.raising) >= c.opt.JoinWait:
		return true
	case !c.confirm.IsZero() && now.After(c.confirm):
		return true
	}
	return false
}

type member struct {
	instance string
	sending  bool
	demand   float64
	// applied is how long ago (by the database's clock) the heartbeat was
	// whose share had taken effect by its latest one; negative: none yet.
	applied time.Duration
}

// beat heartbeats, reads the live members and applies this instance's
// share and any cluster pause.
func (c *Coordinator) beat(ctx context.Context) {
	c.at(ctx, "beat")
	now := time.Now()
	demand := c.demand()
	if demand > 0 {
		c.lastBusy, c.lastWant = now, demand
	} else if now.Sub(c.lastBusy) < c.opt.Interval {
		// Between two chunk runs: still sending, not a leave and a join.
		demand = c.lastWant
	}
	sending := demand > 0
	c.lower(sending, demand)
	members, pausedFor, err := c.exchange(ctx, sending, demand)
	read := now // no later than the read of the members' rows
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		c.retryAt = now.Add(c.opt.Interval)
		silent := time.Since(c.lastBeat)
		if silent < c.keepFor() {
			c.log.Warn("rate budget heartbeat failed; keeping the last share", "err", err)
			return
		}
		// The others are about to count this instance out and split the
		// limit without it: hold until a heartbeat gets through (a
		// failing one takes up to 2 × Interval, the next starts an
		// Interval later; the grant runs out at Stale in any case).
		c.log.Warn("rate budget heartbeats failing; holding sends until one gets through", "silent", silent.Round(time.Millisecond), "err", err)
		c.hold()
		return
	}
	c.at(ctx, "apply")
	// Measured after this beat's write: if the others could have read the
	// previous heartbeat as older than Stale, more than Stale has passed.
	if gap := time.Since(c.lastBeat); gap > c.opt.Stale {
		c.rejoin(gap)
		if time.Since(now) > c.opt.Stale {
			// The gap was inside this beat: what it read is too old to
			// split by (a member that began sending since is missing).
			// The next look beats again.
			return
		}
	}
	// The beat's start: its heartbeat_at is no earlier, so the others
	// count this instance in at least until lastBeat + Stale, and the
	// share it applies may be spent until then (grant).
	c.lastBeat = now
	c.apply(sending, demand, members, read)
	c.applied = true
	c.grant(now.Add(c.opt.Stale))
	if pausedFor > 0 {
		c.throttle.Hold(time.Now().Add(pausedFor))
	}
	if c.beats++; c.beats%40 == 0 {
		c.purge(ctx)
	}
}

// lower takes this instance's share down to what a fallen demand can get
// (its demand, or the trickle for a leave) before the heartbeat stores the
// demand: the others take up what it leaves as soon as they read it, so a
// share that fell only when the read came back (after the write) let the
// parts add up to more than the limit meanwhile.
func (c *Coordinator) lower(sending bool, demand float64) {
	if sending && demand >= c.granted {
		return
	}
	ceiling := c.opt.Limit * trickle
	if sending {
		ceiling = demandOf(demand)
	}
	c.mu.Lock()
	share, members := c.share, c.members
	c.mu.Unlock()
	if share > ceiling {
		c.setShare(ceiling, members)
	}
}

// grant lets the throttle spend the share until until (Stale after the
// start of the heartbeat whose read the share was split from): the others
// count this instance in until Stale after its heartbeat_at, which is no
// earlier, so however long this process stalls (a VM paused, SIGSTOP, a
// long GC), it never sends at a share that the others, having counted it
// out, have taken over. So at any moment every member's share was split
// from a read begun less than Stale before, or it sends nothing.
func (c *Coordinator) grant(until time.Time) {
	c.mu.Lock()
	c.until = until
	c.mu.Unlock()
	c.throttle.GrantUntil(until)
}

// hold ends the grant now: no sends until a heartbeat grants the share
// again.
func (c *Coordinator) hold() {
	now := time.Now()
	c.mu.Lock()
	if c.until.IsZero() || c.until.After(now) {
		c.until = now
	}
	until, members, report := c.until, c.members, c.report
	c.mu.Unlock()
	c.throttle.GrantUntil(until)
	if report != nil {
		report(0, members)
	}
}

// rejoin is for a beat that got through more than Stale after the last
// good one began (the process was stopped, or heartbeats failed that
// long): the others may have counted this instance out and split the
// limit without it. Its grant has run out; it holds, and joins again as a
// new member does, from nothing granted: the trickle until the others have
// made room, then its part.
func (c *Coordinator) rejoin(gap time.Duration) {
	c.log.Warn("rate budget: longer than the stale limit since the last good heartbeat began; holding and joining again", "gap", gap.Round(time.Millisecond), "stale", c.opt.Stale)
	c.hold()
	c.granted, c.raising, c.confirm = 0, time.Time{}, time.Time{}
}

// keepFor is how long after its last good heartbeat began an instance
// whose heartbeats fail keeps its share: until the latest moment it can
// still hold before the others count it out (Stale after that heartbeat),
// allowing for a failing beat's 2 × Interval timeout and the Interval to
// the next one.
func (c *Coordinator) keepFor() time.Duration {
	return max(0, c.opt.Stale-3*c.opt.Interval)
}

// purge deletes the rows of members gone for a minute (killed processes:
// each process is a member of its own, see Member).
func (c *Coordinator) purge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.opt.Interval*2)
	defer cancel()
	if _, err := c.db.ExecContext(ctx, `DELETE FROM budget_members WHERE project = ? AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE`, c.opt.Project); err != nil {
		c.log.Debug("purging gone rate budget members failed; the next purge retries", "err", err)
	}
}

// exchange writes this instance's row and reads the other live members and
// the project's pause (how long it has left).
func (c *Coordinator) exchange(ctx context.Context, sending bool, demand float64) ([]member, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opt.Interval*2)
	defer cancel()
	var stored sql.NullFloat64
	if sending && !math.IsInf(demand, 1) {
		stored = sql.NullFloat64{Float64: demand, Valid: true}
	}
	// applied_at certifies the previous heartbeat: the beat that wrote it
	// read the members after writing and applied its share before this
	// one began (unless it failed). SET runs left to right, so it takes
	// the old heartbeat_at.
	if _, err := c.db.ExecContext(ctx, `INSERT INTO budget_members (project, instance, sending, demand, heartbeat_at, schema_version) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), ?)
		ON DUPLICATE KEY UPDATE applied_at = IF(?, heartbeat_at, applied_at), sending = VALUES(sending), demand = VALUES(demand), heartbeat_at = VALUES(heartbeat_at),
			schema_version = VALUES(schema_version)`,
		c.opt.Project, c.opt.Instance, sending, stored, c.opt.Schema, c.applied); err != nil {
		c.applied = false
		return nil, 0, fmt.Errorf("heartbeat: %w", err)
	}
	c.applied = false // until this beat's share is applied
	c.at(ctx, "read")
	rows, err := c.db.QueryContext(ctx, `SELECT instance, sending, demand, COALESCE(TIMESTAMPDIFF(MICROSECOND, applied_at, UTC_TIMESTAMP(6)), -1) FROM budget_members
		WHERE project = ? AND instance <> ? AND heartbeat_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`,
		c.opt.Project, c.opt.Instance, c.opt.Stale.Microseconds())
	if err != nil {
		return nil, 0, fmt.Errorf("reading members: %w", err)
	}
	defer rows.Close()
	var out []member
	for rows.Next() {
		var m member
		var d sql.NullFloat64
		var ageMicros int64
		if err := rows.Scan(&m.instance, &m.sending, &d, &ageMicros); err != nil {
			return nil, 0, fmt.Errorf("reading members: %w", err)
		}
		m.applied = time.Duration(ageMicros) * time.Microsecond
		m.demand = math.Inf(1)
		if d.Valid {
			m.demand = d.Float64
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading members: %w", err)
	}
	var left sql.NullInt64
	err = c.db.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), paused_until) FROM budget_pauses WHERE project = ?`, c.opt.Project).Scan(&left)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("reading the pause: %w", err)
	}
	return out, time.Duration(left.Int64) * time.Microsecond, nil
}

// publish records the longest local 429 pause not yet published for every
// instance, by the database's clock: the end is now + what is left of it.
// One whose write fails is published again at the next heartbeat, while
// it lasts.
func (c *Coordinator) publish(ctx context.Context) {
	c.mu.Lock()
	until := c.pause
	c.pause = time.Time{}
	c.mu.Unlock()
	left := time.Until(until)
	if until.IsZero() || left <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, c.opt.Interval*2)
	defer cancel()
	if _, err := c.db.ExecContext(wctx, `INSERT INTO budget_pauses (project, paused_until) VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
		ON DUPLICATE KEY UPDATE paused_until = GREATEST(paused_until, VALUES(paused_until))`, c.opt.Project, left.Microseconds()); err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("publishing a 429 pause failed; trying again at the next heartbeat", "err", err)
		c.keepPause(until)
	}
}
