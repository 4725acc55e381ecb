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
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/platform/sqldb"
)

// Options tune a Coordinator.
type Options struct {
	Project  string  // the FCM project the budget is for
	Instance string  // this process's name in the budget (see Member)
	Limit    float64 // the project's messages per second
	// Schema is the database schema this release was built for, written
	// with every heartbeat so that the cluster view shows the instances
	// older than the database (docs/operations.md, "Upgrades").
	Schema   int64
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
