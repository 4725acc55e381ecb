package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// drain waits, with the faults undone and the load stopped, until every
// broadcast is final and every webhook event delivered.
func drain(ctx context.Context, s *stack, r *run, l *load, c *checker) {
	if err := l.flushChores(ctx); err != nil {
		r.violate(0, fmt.Sprintf("drain: releasing the held broadcasts: %v", err))
		return
	}
	var lefts []struct {
		App  string `db:"app"`
		Left int64  `db:"left"`
	}
	if err := s.db.Select(&lefts, "SELECT app, COALESCE(SUM(targeted - succeeded - failed - canceled - capped), 0) AS `left` FROM broadcasts WHERE status NOT IN ('completed', 'canceled', 'failed') GROUP BY app"); err != nil {
		r.violate(0, fmt.Sprintf("drain: %v", err))
		return
	}
	// What is left of each app at half its quota (the apps send side by
	// side, each within its own), plus a lease and the 30 s, plus the
	// local-time broadcasts' 40 s: a run that needs longer has stalled.
	var left int64
	var slowest time.Duration
	for _, x := range lefts {
		left += x.Left
		for _, a := range s.cfg.apps {
			if a.name == x.App {
				slowest = max(slowest, time.Duration(float64(x.Left)/(a.rate/2)*float64(time.Second)))
			}
		}
	}
	within := s.cfg.lease + 30*time.Second + 40*time.Second + slowest
	if !waitFor(ctx, within, func() bool {
		var n int
		return s.db.QueryRow("SELECT COUNT(*) FROM broadcasts WHERE status NOT IN ('completed', 'canceled', 'failed')").Scan(&n) == nil && n == 0
	}) {
		var id uint64
		var status string
		_ = s.db.QueryRow("SELECT id, status FROM broadcasts WHERE status NOT IN ('completed', 'canceled', 'failed') ORDER BY id LIMIT 1").Scan(&id, &status)
		r.violate(id, fmt.Sprintf("drain: still %s %v after the load and the faults stopped (%d targets were left)", status, within.Round(time.Second), left))
		return
	}
	// The replicas retry after about 2 s, 5 s, 10 s, 20 s, then every
	// 30 s (each ±20 %; PUSHFAN_WEBHOOK_RETRY_SCHEDULE in stack_test.go):
	// an event whose attempts met a receiver away (or a database restart)
	// is next due within 36 s, or 40 s (a claim's lease: the attempt's
	// timeout and 30 s) when its replica was killed mid-attempt. Three
	// minutes leave room for two more failures; a due time past them is a
	// stuck deliverer.
	if err := awaitWebhooks(ctx, s.db, time.Minute, 30*time.Second, 3*time.Minute); err != nil {
		if ctx.Err() == nil {
			r.violate(0, "drain: "+err.Error())
		}
		return
	}
	// A stalled holder whose chunk a cancel closed reports what it sent
	// when it resumes; one that was killed never does.
	if !waitFor(ctx, c.lateHolderWait()+10*time.Second, func() bool {
		var n int
		return s.db.QueryRow("SELECT COUNT(*) FROM late_holders WHERE closed_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND",
			c.lateHolderWait().Microseconds()).Scan(&n) == nil && n == 0
	}) {
		r.violate(0, fmt.Sprintf("drain: a late holder still unheard %v after the faults stopped", c.lateHolderWait()))
		return
	}
	// The checker verifies a final broadcast once it has been final for
	// 2 s; give it two more rounds.
	_ = sleep(ctx, 2*checkEvery+time.Second)
}

// awaitWebhooks waits until every webhook event in the outbox is
// delivered: at least floor, and until each undelivered event's next
// attempt has come due (next_at) plus margin for the attempt itself, but
// never past ceiling (a due time beyond it means a stuck deliverer). An
// event undelivered then is an error naming how many and the most
// attempts one has had.
func awaitWebhooks(ctx context.Context, db *sqlx.DB, floor, margin, ceiling time.Duration) error {
	start := time.Now()
	deadline := start.Add(floor)
	for {
		var pending struct {
			N     int   `db:"n"`
			DueIn int64 `db:"due_in"`
			Most  int   `db:"most"`
		}
		err := db.GetContext(ctx, &pending, "SELECT COUNT(*) AS n, COALESCE(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(next_at)), 0) AS due_in, COALESCE(MAX(attempts), 0) AS most FROM webhook_outbox WHERE status <> 'delivered'")
		if err == nil && pending.N == 0 {
			return nil
		}
		if err == nil {
			due := time.Now().Add(time.Duration(pending.DueIn)*time.Microsecond + margin)
			if due.After(deadline) && !due.After(start.Add(ceiling)) {
				deadline = due
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("webhook events not known delivered %v after every broadcast was final: %w", time.Since(start).Round(time.Second), err)
			}
			return fmt.Errorf("%d webhook events still undelivered %v after every broadcast was final, past their next attempt's due time (the most attempts of one: %d)",
				pending.N, time.Since(start).Round(time.Second), pending.Most)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitFor polls cond every 500 ms until it holds (true) or within passes.
func waitFor(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || sleep(ctx, 500*time.Millisecond) != nil {
			return false
		}
	}
	return true
}

// finalChecks are the invariants read once the run has drained.
func finalChecks(s *stack, r *run, l *load, c *checker, loadEnd time.Time) {
	c.finalPass = true
	for id, b := range c.rows {
		if b.final() && !c.verified[id] {
			c.checkFinal(b, time.Now().Add(time.Hour), nil)
		}
	}
	for _, e := range s.emus {
		if n := e.arr.unattributedSends(); n > 0 {
			r.violate(0, fmt.Sprintf("%d sends %s accepted carry no event token of a broadcast", n, e.target()))
		}
		for _, id := range e.arr.broadcasts() {
			if b, ok := c.rows[id]; !ok || b.App != e.app.name {
				r.violate(id, fmt.Sprintf("%s accepted sends of broadcast %d, which is not a broadcast of app %s (its app: %q)", e.target(), id, e.app.name, b.App))
			}
		}
	}
	c.caps = checkCaps(s, r)
	checkCron(s, r, loadEnd)
	checkWebhooks(s, r)
	checkEngagement(s, r, l)
	// The quota, app by app: each emulator against its own app's quota,
	// its 429s outside its own storms.
	for _, e := range s.emus {
		allowed := func(from time.Time) int { n, _ := quotaAllowance(s.cfg, e.app, s.probe, from); return n }
		if n, limit, from, over := e.arr.overQuota(s.cfg.quotaWindow, quotaWithSlack(s.cfg, e.app), allowed); over {
			_, lead := quotaAllowance(s.cfg, e.app, s.probe, from)
			r.violate(0, fmt.Sprintf("%d requests arrived at %s within %v from %s: over app %s's quota %d by more than the slack (%d allowed, with %v of the checker's own stall at the window's start)",
				n, e.target(), s.cfg.quotaWindow, from.Sub(r.t0).Round(time.Millisecond), e.app.name, quotaOf(s.cfg, e.app), limit, lead.Round(time.Millisecond)))
		}
		if st := quotaShare(s, e, r.t0, loadEnd); st.requests > 0 && float64(st.limited) > 0.001*float64(st.requests) {
			r.violate(0, fmt.Sprintf("%d of %d requests (%.3f%%) at %s answered 429 outside its storms: more than 0.1%%", st.limited, st.requests, 100*float64(st.limited)/float64(st.requests), e.target()))
		}
	}
}

// checkCron: every minute the run spanned fired the job exactly once (the
// database's unique key makes more than once impossible to store; a
// missing or skipped fire is what can go wrong).
func checkCron(s *stack, r *run, loadEnd time.Time) {
	from := r.t0.Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	for m := from; m.Before(loadEnd.Add(-10 * time.Second)); m = m.Add(time.Minute) {
		var n, skipped int
		if err := s.db.QueryRow("SELECT COUNT(*) FROM broadcasts WHERE job_name = ? AND fire_time = ?", cronJob, m.UTC()).Scan(&n); err != nil {
			r.violate(0, fmt.Sprintf("cron: %v", err))
			return
		}
		_ = s.db.QueryRow("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = ? AND fire_time = ?", cronJob, m.UTC()).Scan(&skipped)
		if n != 1 {
			r.violate(0, fmt.Sprintf("cron: the fire of %s at %s made %d broadcasts (%d skipped), want exactly 1", cronJob, m.UTC().Format(time.TimeOnly), n, skipped))
			return
		}
	}
}

// checkWebhooks: every event in the outbox reached the sink at least once.
func checkWebhooks(s *stack, r *run) {
	var ids []string
	if err := s.db.Select(&ids, "SELECT msg_id FROM webhook_outbox"); err != nil {
		r.violate(0, fmt.Sprintf("webhooks: %v", err))
		return
	}
	got, _ := s.sink.received()
	for _, id := range ids {
		if got[id] == 0 {
			r.violate(0, fmt.Sprintf("webhooks: event %s is in the outbox and never reached the receiver", id))
			return
		}
	}
}

// checkEngagement: the opens stored per broadcast are the distinct targets
// whose open an API answered 200.
func checkEngagement(s *stack, r *run, l *load) {
	var rows []struct {
		ID uint64 `db:"broadcast_id"`
		N  int    `db:"n"`
	}
	if err := s.db.Select(&rows, "SELECT broadcast_id, COUNT(*) AS n FROM engagement_events WHERE type = 2 GROUP BY broadcast_id"); err != nil {
		r.violate(0, fmt.Sprintf("engagement: %v", err))
		return
	}
	stored := map[uint64]int{}
	for _, x := range rows {
		stored[x.ID] = x.N
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.opened {
		if _, ok := stored[id]; !ok {
			stored[id] = 0
		}
	}
	for id, n := range stored {
		if want := len(l.opened[id]); n != want {
			r.violate(id, fmt.Sprintf("engagement: %d opens stored, %d distinct targets' opens answered 200", n, want))
			return
		}
	}
}
