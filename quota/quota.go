// Package quota shares one FCM project's rate budget between the instances
// sending to it. FCM counts its quota per project (600,000 messages a
// minute by default), so PUSHFAN_RATE_LIMIT is the project's rate, not an
// instance's.
//
// The mechanism, with MySQL as the coordinator and no database round trip
// per send:
//
//   - Every instance heartbeats its row in budget_members every Interval
//     (250 ms, and at once when it starts sending or wants more), saying whether
//     it is sending and the rate it can use: as much as it gets, or the
//     sum of its paced broadcasts' rates and fanout.UrgentDemand while a
//     transactional one runs (the engine's Demand). It reads the rows of the members
//     alive (a heartbeat within Stale, 1 s) and sending, splits the limit
//     between them by max-min fairness (a member that needs less than an
//     equal part gets what it needs, the rest share what it leaves) and sets
//     its own throttle to its part.
//   - Joining is the one moment two instances could both count on the
//     same budget, so a joiner makes room first (and so does a sender whose
//     demand rises: bulk sends beside its paced ones). An instance that starts
//     sending heartbeats at once; if others are sending, it sends at a
//     trickle (1% of the limit, which a 3-user transactional send fits in)
//     for JoinWait (300 ms), by when every sender has seen it and
//     lowered its own share, and then takes its part. With no sender about
//     it starts at the limit over the live members (others may be joining
//     at the same moment, unseen) and takes its part 80 ms later, when a
//     heartbeat would see them.
//     Senders lower and raise their shares at once: a joiner always waits
//     for them. An idle instance's throttle is at the trickle too, for the
//     moment between its first send and its join's heartbeat. The trickle
//     is the one rate outside the split: a joiner adds at most 1% of the
//     limit for about 300 ms, 3 ms worth.
//   - A member that stops sending says so at its next heartbeat (a gap
//     shorter than Interval between two chunk runs is not a leave); one that
//     stops deletes its row; one that dies stops heartbeating and drops out
//     after Stale (1 s), its row deleted a minute later. The others take up
//     its share at their next heartbeat: within about a second and a half.
//   - A 429 seen by one instance (the project's quota, or a storm) is
//     written to budget_pauses at once, as the instant it ends by the
//     database's clock. Every other instance reads it at its next heartbeat
//     and pauses until then, so the cluster stops within a heartbeat or two
//     and ramps back up together from the same instant.
//
// Failure modes:
//
//   - The database unreachable from one instance: its heartbeats fail and
//     it keeps its last share for Stale − 3 × Interval after the start of
//     its last good one (a failing beat takes up to 2 × Interval, and the
//     next starts an Interval later, so it holds before the others, which
//     count it out Stale after that heartbeat, take its share); then it
//     holds its sends until a heartbeat gets through (its chunks cannot checkpoint meanwhile either, and
//     their leases go to the instances that can). Unreachable from every
//     instance: each holds after Stale; nothing is sent without the
//     database that records it.
//   - A sender whose heartbeat is late (a slow database) delays a
//     joiner's rise past JoinWait: the rise waits until every other
//     sender has beaten since it began, or until one that stops beating is
//     counted out after Stale, so late beats never make the parts overlap.
//     (A member certifies a heartbeat at its next one, applied_at, once the
//     share it read had taken effect.)
//   - Clocks: heartbeat, lease and pause times are the database's, never an
//     instance's, so instances' clocks need not agree.
//   - Instances configured with different limits for the same project each
//     split their own limit: configure them alike.
package quota

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"pushfan/fanout"
	"pushfan/internal/lifecycle"
	"pushfan/internal/sqldb"
)

// Options tune a Coordinator.
type Options struct {
	Project  string        // the FCM project the budget is for
	Instance string        // this process's name in the budget (see Member)
	Limit    float64       // the project's messages per second
	Interval time.Duration // between heartbeats (default 250 ms)
	Stale    time.Duration // a member silent this long has gone (default 4 × Interval)
	// JoinWait is how long a member that starts sending beside others
	// trickles before it takes its part (default 1.2 × Interval: every
	// sender has heartbeaten and made room by then, with 50 ms for the
	// database to answer it).
	JoinWait time.Duration
}

// trickle is a joiner's rate while the senders make room, as a fraction
// of the limit.
const trickle = 0.01

// Member names this process in the budget: its lease owner, which may be
// pinned and even (wrongly) shared by two processes, made unique, so two
// processes under one id still split the budget rather than each take all.
func Member(owner string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := fmt.Sprintf("/%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	if len(owner)+len(suffix) > 64 {
		owner = owner[:64-len(suffix)]
	}
	return owner + suffix
}

// Coordinator keeps this instance's throttle at its share of the project's
// budget and spreads 429 pauses through the cluster.
type Coordinator struct {
	db       *sql.DB
	log      *slog.Logger
	opt      Options
	throttle *fanout.Throttle
	// demand is the rate this instance can use now: 0 when idle, +Inf when
	// a broadcast takes all it gets (the engine's Demand).
	demand func() float64

	pauses chan time.Time // local 429 pauses to publish
	loop   lifecycle.Loop

	// The loop's own state.
	granted float64   // the demand the others have had JoinWait to see (0 while idle)
	raising time.Time // when a demand above granted was first stored (zero: none)
	// applied: the last heartbeat's share took effect (written as
	// applied_at by the next one).
	applied  bool
	confirm  time.Time // sending began alone: beat again then, to see anyone who began with it
	lastBeat time.Time // the last heartbeat that got through
	retryAt  time.Time // after a failed heartbeat, the next one not before
	lastBusy time.Time // the last time the demand was above 0
	lastWant float64   // the demand then
	beats    int

	mu      sync.Mutex
	members int     // sending members last counted, this one included
	share   float64 // this instance's messages per second
	report  func(perSecond float64, members int)

	// hook, for tests only (set before Start, see export_test.go), is
	// called by the heartbeat loop at each stage of a beat: "beat" (one
	// begins), "read" (its row written, the reads next; ctx is theirs) and
	// "apply" (read, its share next). Blocking in it stalls the loop.
	hook func(ctx context.Context, stage string)
}

// at runs the test hook, if any, at stage.
func (c *Coordinator) at(ctx context.Context, stage string) {
	if c.hook != nil {
		c.hook(ctx, stage)
	}
}

// New returns a Coordinator for throttle; demand reports the rate the
// instance can use (see Coordinator.demand).
func New(db *sql.DB, log *slog.Logger, throttle *fanout.Throttle, demand func() float64, opt Options) *Coordinator {
	if opt.Interval <= 0 {
		opt.Interval = 250 * time.Millisecond
	}
	if opt.Stale <= 0 {
		opt.Stale = 4 * opt.Interval
	}
	if opt.JoinWait <= 0 {
		opt.JoinWait = opt.Interval * 6 / 5
	}
	c := &Coordinator{db: db, log: sqldb.OrDiscard(log), opt: opt, throttle: throttle, demand: demand, pauses: make(chan time.Time, 16)}
	c.setShare(opt.Limit*trickle, 1)
	throttle.OnPause(c.paused)
	return c
}

// Start heartbeats until Stop or ctx ends.
func (c *Coordinator) Start(ctx context.Context) { c.loop.Start(ctx, c.run) }

// Stop ends the heartbeats and removes this instance's row, so the others
// take its share at their next heartbeat. Safe twice.
func (c *Coordinator) Stop(ctx context.Context) error {
	if err := c.loop.Stop(ctx); err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.db.ExecContext(dctx, "DELETE FROM budget_members WHERE project = ? AND instance = ?", c.opt.Project, c.opt.Instance); err != nil {
		return fmt.Errorf("leaving the rate budget: %w", err)
	}
	return nil
}

// Share is this instance's current share of the budget, in messages per
// second, and the sending instances it was split between.
func (c *Coordinator) Share() (perSecond float64, members int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.share, c.members
}

// OnShare installs fn, told every share this instance takes (metrics).
func (c *Coordinator) OnShare(fn func(perSecond float64, members int)) {
	c.mu.Lock()
	c.report = fn
	c.mu.Unlock()
	fn(c.Share())
}

// paused is the throttle's hook for a 429 this instance got: publish it.
func (c *Coordinator) paused(until time.Time) {
	select {
	case c.pauses <- until:
	default: // a burst of 429s: the next heartbeat reads the latest anyway
	}
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
	c.beat(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case until := <-c.pauses:
			c.publish(ctx, until)
		case <-look.C:
			if c.due(time.Now()) {
				c.beat(ctx)
				beat.Reset(c.opt.Interval)
			}
		case <-beat.C:
			c.beat(ctx)
		}
	}
}

// due reports whether a heartbeat should go now, before the next regular
// one: the demand rose above what the others know (a join, or a bulk send
// beside paced ones), or a raise's or a fresh join's wait is over. Not
// within an Interval of a failed heartbeat.
func (c *Coordinator) due(now time.Time) bool {
	if now.Before(c.retryAt) {
		return false
	}
	switch d := c.demand(); {
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
	members, pausedFor, err := c.exchange(ctx, sending, demand)
	read := now // no later than the read of the members' rows
	if err == nil {
		c.at(ctx, "apply")
	}
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
		// The others have counted this instance out and split the limit
		// without it: hold until a heartbeat gets through (a failing one
		// takes up to 2 × Interval, the next starts an Interval later).
		c.log.Warn("rate budget heartbeats failing; holding sends until one gets through", "silent", silent.Round(time.Millisecond), "err", err)
		c.throttle.Hold(time.Now().Add(3 * c.opt.Interval))
		return
	}
	// The beat's start: its heartbeat_at is no earlier, so the others
	// count this instance in at least until lastBeat + Stale.
	c.lastBeat = now
	c.apply(sending, demand, members, read)
	c.applied = true
	if pausedFor > 0 {
		c.throttle.Hold(time.Now().Add(pausedFor))
	}
	if c.beats++; c.beats%40 == 0 {
		c.purge(ctx)
	}
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
	if _, err := c.db.ExecContext(ctx, `INSERT INTO budget_members (project, instance, sending, demand, heartbeat_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
		ON DUPLICATE KEY UPDATE applied_at = IF(?, heartbeat_at, applied_at), sending = VALUES(sending), demand = VALUES(demand), heartbeat_at = VALUES(heartbeat_at)`,
		c.opt.Project, c.opt.Instance, sending, stored, c.applied); err != nil {
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
	case c.raising.IsZero() || now.Sub(c.raising) < c.opt.JoinWait || !beatSince(others, read.Sub(c.raising)):
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

// publish records a 429's pause for every instance, by the database's
// clock: the end is now + what is left of it.
func (c *Coordinator) publish(ctx context.Context, until time.Time) {
	left := time.Until(until)
	if left <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.opt.Interval*2)
	defer cancel()
	if _, err := c.db.ExecContext(ctx, `INSERT INTO budget_pauses (project, paused_until) VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
		ON DUPLICATE KEY UPDATE paused_until = GREATEST(paused_until, VALUES(paused_until))`, c.opt.Project, left.Microseconds()); err != nil {
		c.log.Warn("publishing a 429 pause failed; other instances will get their own 429", "err", err)
	}
}
