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
//     for them. A share that falls because this instance's own demand fell
//     (a leave, or a pace below its part) falls before the heartbeat
//     stores that demand, as the others take up what it leaves as soon as
//     they read it. An idle instance's throttle is at the trickle too, for the
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
//     and ramps back up together from the same instant. A burst of 429s
//     publishes its longest pause (none is dropped), and one whose write
//     fails is written again at the next heartbeat while it lasts.
//   - A share is granted until Stale after the start of the heartbeat
//     whose read it was split from, by the instance's own monotonic clock
//     (fanout.Throttle.GrantUntil): the others count the instance in at
//     least that long, and past it its throttle gives no permit until a
//     heartbeat grants one again. So at any moment every member's share
//     was split from a read begun less than Stale before, or it sends
//     nothing.
//
// Failure modes:
//
//   - The database unreachable from one instance: its heartbeats fail and
//     it keeps its last share for Stale − 3 × Interval after the start of
//     its last good one (a failing beat takes up to 2 × Interval, and the
//     next starts an Interval later, so it holds before the others, which
//     count it out Stale after that heartbeat, take its share; its grant
//     runs out at Stale in any case); then it holds its sends until a
//     heartbeat gets through (its chunks cannot checkpoint meanwhile either, and
//     their leases go to the instances that can). Unreachable from every
//     instance: each holds after Stale; nothing is sent without the
//     database that records it.
//   - A process stopped past Stale (a VM paused, SIGSTOP, a long GC), or
//     one whose heartbeats failed that long: the others have counted it
//     out and taken its share, and its grant has run out, so whatever runs
//     first when it resumes sends nothing. The first heartbeat that gets
//     through more than Stale after the last good one began joins again as
//     a new member does: the trickle, then its part once the others have
//     made room. (One whose gap fell inside the beat, after its write,
//     ignores what it read and beats again at once.)
//   - A sender whose heartbeat is late (a slow database) delays a
//     joiner's rise past JoinWait: the rise waits until every other
//     sender has applied a share read since it began, so late beats never
//     make the parts overlap. (A member certifies a heartbeat at its next
//     one, applied_at, once the share it read had taken effect.) It waits
//     Stale at most: by then every member's share was split from a read
//     that saw the joiner, or that member sends nothing (the grant). So a
//     member whose heartbeats are written but whose reads keep timing out
//     (it never certifies a share, and holds) cannot block a join.
//   - Clocks: heartbeat, lease and pause times are the database's, never an
//     instance's, so instances' clocks need not agree; a grant is a span of
//     the instance's own monotonic clock, which a wall-clock step does not
//     move.
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

	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/platform/sqldb"
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
	throttle Limiter
	// demand is the rate this instance can use now: 0 when idle, +Inf when
	// a broadcast takes all it gets (the engine's Demand).
	demand func() float64

	// pausing (capacity 1) wakes the loop to publish pause, the longest
	// local 429 pause not yet published (under mu). A burst of 429s
	// coalesces into its longest pause: the published one only extends.
	pausing chan struct{}
	loop    lifecycle.Loop

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
	// until is when the throttle's grant runs out (see grant): the share
	// is 0 from then; zero: no grant yet (before Start).
	until  time.Time
	pause  time.Time
	report func(perSecond float64, members int)

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
func New(db *sql.DB, log *slog.Logger, throttle Limiter, demand func() float64, opt Options) *Coordinator {
	if opt.Interval <= 0 {
		opt.Interval = 250 * time.Millisecond
	}
	if opt.Stale <= 0 {
		opt.Stale = 4 * opt.Interval
	}
	if opt.JoinWait <= 0 {
		opt.JoinWait = opt.Interval * 6 / 5
	}
	c := &Coordinator{db: db, log: sqldb.OrDiscard(log), opt: opt, throttle: throttle, demand: demand, pausing: make(chan struct{}, 1)}
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
// second (0 while it holds its sends), and the sending instances it was
// split between.
func (c *Coordinator) Share() (perSecond float64, members int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.until.IsZero() && !time.Now().Before(c.until) {
		return 0, c.members
	}
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
		// Nobody sent beside it: its bucket may be full at once (see
		// fanout.Throttle.Fill), not refill from the trickle's.
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
		c.throttle.Fill()
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
