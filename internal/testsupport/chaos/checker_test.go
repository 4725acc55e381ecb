package chaos

import (
	"context"
	"fmt"
	"time"
)

// row is a broadcast as the checker reads it from the database (directly,
// not through the fault proxy).
type row struct {
	ID         uint64     `db:"id"`
	App        string     `db:"app"`
	Status     string     `db:"status"`
	Targeted   int64      `db:"targeted"`
	Succeeded  int64      `db:"succeeded"`
	Failed     int64      `db:"failed"`
	Canceled   int64      `db:"canceled"`
	Capped     int64      `db:"capped"`
	CreatedAt  time.Time  `db:"created_at"`
	ReleasedAt *time.Time `db:"released_at"`
	FinishedAt *time.Time `db:"finished_at"`
}

func (r row) final() bool {
	return r.Status == "completed" || r.Status == "canceled" || r.Status == "failed"
}

func (r row) done() int64 { return r.Succeeded + r.Failed + r.Canceled + r.Capped }

// progress is when a broadcast's outcomes last moved.
type progress struct {
	done int64
	at   time.Time
}

// checker holds the invariants that are checked while the run goes on
// (every checkEvery) and once more after the drain.
type checker struct {
	s *stack
	r *run
	l *load

	prog      map[uint64]progress
	verified  map[uint64]bool
	finalSeen map[uint64]time.Time
	// dupIdx and misIdx are, per app's emulator, how far its duplicates
	// and misrouted requests have been read.
	dupIdx, misIdx map[string]int
	dups           int64
	// canceledDelivered are targets counted canceled that FCM accepted
	// (chargeCanceled).
	canceledDelivered int64
	// canceledDeliveredBy splits them by the kind of fault charged.
	canceledDeliveredBy map[string]int64
	rows                map[uint64]row
	// longestStall is the longest a due, unfinished broadcast went without
	// an outcome, counted from the later of its last outcome and the last
	// fault; longestFinal the longest from submit (or release, or the
	// local time due) to final.
	longestStall, longestFinal     time.Duration
	longestStallID, longestFinalID uint64
	clusterDone                    int64
	clusterAt                      time.Time
	// busy are, per app, the spans between two checks that both saw a
	// broadcast of it running: the seconds its throughput is measured
	// over.
	busy      map[string][][2]time.Time
	lastCheck time.Time
	wasRun    map[string]bool
	// finalPass: the run has drained (and waited for the late holders);
	// every final broadcast is verified as it is.
	finalPass bool
	// caps is what the frequency-cap checks found (finalChecks).
	caps capResult
}

func (c *checker) wasBusy(app string, at time.Time) bool {
	for _, b := range c.busy[app] {
		if !at.Before(b[0]) && at.Add(time.Second).Before(b[1]) {
			return true
		}
	}
	return false
}

const checkEvery = 2 * time.Second

func newChecker(s *stack, r *run, l *load) *checker {
	return &checker{s: s, r: r, l: l, prog: map[uint64]progress{}, canceledDeliveredBy: map[string]int64{}, verified: map[uint64]bool{}, finalSeen: map[uint64]time.Time{}, rows: map[uint64]row{},
		dupIdx: map[string]int{}, misIdx: map[string]int{}, busy: map[string][][2]time.Time{}, wasRun: map[string]bool{}}
}

// loop checks until ctx is done.
func (c *checker) loop(ctx context.Context) {
	for {
		c.check(time.Now())
		if err := sleep(ctx, checkEvery); err != nil {
			return
		}
	}
}

// check runs every continuous invariant once; a violation stops the run.
func (c *checker) check(now time.Time) {
	var rows []row
	if c.s.dbRestarting(now) {
		return // the checker's own connection is down with the server
	}
	if err := c.s.db.Select(&rows, `SELECT id, app, status, targeted, succeeded, failed, canceled, capped,
		created_at, released_at, finished_at FROM broadcasts`); err != nil {
		c.r.violate(0, fmt.Sprintf("checker: reading broadcasts: %v", err))
		return
	}
	lastFault := c.s.faults.lastTouch(now)
	due, total, running := false, int64(0), map[string]bool{}
	for _, b := range rows {
		total += b.done()
		running[b.App] = running[b.App] || b.Status == "running"
	}
	for _, app := range c.s.cfg.apps {
		if running[app.name] && c.wasRun[app.name] {
			c.busy[app.name] = append(c.busy[app.name], [2]time.Time{c.lastCheck, now})
		}
	}
	c.lastCheck, c.wasRun = now, running
	c.l.mu.Lock()
	local := make(map[uint64]time.Time, len(c.l.local))
	for id, at := range c.l.local {
		local[id] = at
	}
	c.l.mu.Unlock()
	for _, b := range rows {
		c.rows[b.ID] = b
		if b.done() > b.Targeted {
			c.r.violate(b.ID, fmt.Sprintf("succeeded %d + failed %d + canceled %d + capped %d = %d, over targeted %d", b.Succeeded, b.Failed, b.Canceled, b.Capped, b.done(), b.Targeted))
			return
		}
		if b.final() {
			c.checkFinal(b, now, local)
			continue
		}
		// A held broadcast waits for its release, a local-time one for its
		// zones; from then on it must keep moving.
		if b.Status == "held" || b.Status == "scheduled" {
			continue
		}
		due = due || now.After(local[b.ID])
		// Only a running broadcast is held to its own progress: a queued
		// one may wait behind older ones while the quota is saturated
		// (the cluster's progress, below, covers it).
		if b.Status != "running" {
			continue
		}
		p, ok := c.prog[b.ID]
		if !ok || p.done != b.done() {
			c.prog[b.ID] = progress{b.done(), now}
			continue
		}
		from := latest(p.at, lastFault, b.CreatedAt, deref(b.ReleasedAt), local[b.ID])
		stall := now.Sub(from)
		if stall > c.longestStall {
			c.longestStall, c.longestStallID = stall, b.ID
		}
		if limit := c.s.cfg.lease + 30*time.Second; stall > limit {
			c.r.violate(b.ID, fmt.Sprintf("%s at %d of %d for %v, more than lease + 30 s (%v) after its last outcome and the last fault", b.Status, b.done(), b.Targeted, stall.Round(time.Second), limit))
			return
		}
	}
	c.checkCluster(now, due, total, lastFault)
	c.checkMisroutes()
	c.checkDuplicates()
}

// checkCluster: while any due broadcast is unfinished, some outcome must
// be stored within lease + 30 s of the last outcome and the last fault.
func (c *checker) checkCluster(now time.Time, due bool, total int64, lastFault time.Time) {
	if c.clusterAt.IsZero() || total != c.clusterDone || !due {
		c.clusterDone, c.clusterAt = total, now
		return
	}
	if stall := now.Sub(latest(c.clusterAt, lastFault)); stall > c.s.cfg.lease+30*time.Second {
		c.r.violate(0, fmt.Sprintf("no outcome stored by any replica for %v while broadcasts were due, more than lease + 30 s after the last fault", stall.Round(time.Second)))
	}
}

// checkFinal checks a final broadcast once it has been final for 2 s (the
// arrivals of its last sends are recorded after their answers, which the
// replica may see first): its counts add up, its sends went to its app's
// emulator only, and succeeded is what that emulator accepted for it,
// target by target.
func (c *checker) checkFinal(b row, now time.Time, local map[uint64]time.Time) {
	if c.verified[b.ID] {
		return
	}
	first, ok := c.finalSeen[b.ID]
	if !ok {
		c.finalSeen[b.ID] = now
		return
	}
	if now.Sub(first) < 2*time.Second {
		return
	}
	if !c.finalPass && c.awaitsLateHolder(b.ID) {
		return
	}
	c.verified[b.ID] = true
	if b.done() != b.Targeted {
		c.r.violate(b.ID, fmt.Sprintf("final (%s) with succeeded %d + failed %d + canceled %d + capped %d = %d, not targeted %d", b.Status, b.Succeeded, b.Failed, b.Canceled, b.Capped, b.done(), b.Targeted))
		return
	}
	got, at := c.s.distinct(b.ID)
	if len(at) > 1 || len(at) == 1 && at[0] != b.App {
		c.r.violate(b.ID, fmt.Sprintf("a broadcast of app %s had sends accepted by the emulators of %v", b.App, at))
		return
	}
	if got > b.Succeeded && b.Status == "canceled" && b.FinishedAt != nil && c.chargeCanceled(b, got-b.Succeeded) {
		got = b.Succeeded // explained: see chargeCanceled
	}
	if got != b.Succeeded {
		c.r.violate(b.ID, fmt.Sprintf("final (%s) with succeeded %d, but the emulator accepted %d distinct targets of it", b.Status, b.Succeeded, got))
		return
	}
	if b.FinishedAt != nil {
		took := b.FinishedAt.Sub(latest(b.CreatedAt, deref(b.ReleasedAt), local[b.ID]))
		if took > c.longestFinal {
			c.longestFinal, c.longestFinalID = took, b.ID
		}
	}
}

// dbRestarting reports whether the private MariaDB is being restarted,
// or was within the last 5 s (a query of the checker's may have started
// just before the stop): the checker's reads wait for it.
func (s *stack) dbRestarting(now time.Time) bool {
	return s.pdb.down() || s.pdb != nil && s.faults.inWindow(now, 5*time.Second, kindDBRestart)
}

// lateHolderWait is how long after a cancel closed a chunk under a
// stalled holder the checker waits for that holder to report (package
// lease, late holders): the longest pause past the lease, and 30 s more.
func (c *checker) lateHolderWait() time.Duration {
	return c.s.cfg.lease + 5*time.Second + 30*time.Second
}

// awaitsLateHolder reports whether a cancel closed a chunk of broadcast id
// under a stalled holder that may still report what it sent (its counts
// may still move out of canceled), for at most lateHolderWait: a holder
// killed since then never reports.
func (c *checker) awaitsLateHolder(id uint64) bool {
	var n int
	if err := c.s.db.QueryRow("SELECT COUNT(*) FROM late_holders WHERE broadcast_id = ? AND closed_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND",
		id, c.lateHolderWait().Microseconds()).Scan(&n); err != nil {
		if !c.s.dbRestarting(time.Now()) {
			c.r.violate(id, fmt.Sprintf("checker: reading late holders: %v", err))
		}
		return true
	}
	return n > 0
}

// chargeCanceled explains the targets of a canceled broadcast that were
// delivered but counted canceled, where nobody can know them: a holder
// killed (kill -9) since its last checkpoint. Its sends reached FCM, and no
// process is left to report them; a cancel then closes its chunk (or its
// successor's close counts them canceled) and counts them canceled.
//
// Every live holder is heard (package lease): one whose chunk the cancel
// closed under it (late holders), and one a takeover fenced off before it
// (paused, or cut off from the database past its lease): its sends are
// stored aside, or reported after the close, and counted target by target
// (fenced.go). A shortfall charged to nothing else but a kill is a
// violation; a kill's is bounded like its duplicates.
func (c *checker) chargeCanceled(b row, n int64) bool {
	for range n {
		kind, ok := c.s.faults.chargeOf(*b.FinishedAt, c.s.cfg.lease+5*time.Second, b.App, kindKill)
		if !ok {
			return false
		}
		c.canceledDeliveredBy[kind]++
	}
	c.canceledDelivered += n
	return true
}

// checkMisroutes stops the run at a request an emulator received for
// another app: under another project's path, or with another app's token.
func (c *checker) checkMisroutes() {
	for _, e := range c.s.emus {
		ms, next := e.arr.misroutes(c.misIdx[e.app.name])
		c.misIdx[e.app.name] = next
		if len(ms) > 0 {
			c.r.violate(ms[0].broadcast, fmt.Sprintf("at %s: %s", ms[0].at.Sub(c.r.t0).Round(time.Millisecond), ms[0].what))
			return
		}
	}
}

// checkDuplicates charges every new duplicate arrival to a fault that
// explains it; one no fault explains stops the run.
func (c *checker) checkDuplicates() {
	for _, e := range c.s.emus {
		ds, next := e.arr.dupsSince(c.dupIdx[e.app.name])
		c.dupIdx[e.app.name] = next
		for _, d := range ds {
			c.dups++
			if !c.s.faults.charge(d.at, c.s.cfg.lease+5*time.Second, e.app.name) {
				c.r.violate(d.broadcast, fmt.Sprintf("target %d of app %s sent twice at %s with no fault to explain it", d.target, e.app.name, d.at.Sub(c.r.t0).Round(time.Millisecond)))
				return
			}
		}
	}
	for _, f := range c.s.faults.overBound() {
		c.r.violate(0, fmt.Sprintf("%s of %s at %s: %d duplicates, over its bound %d", f.kind, f.target, f.start.Sub(c.r.t0).Round(time.Millisecond), f.dups, f.bound))
		return
	}
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
