package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// quotaShare sums e's seconds from from to to, but those of a storm of e
// and the 5 s after it (its 429s are the injected fault, and the clients
// ramp back up after it). Another emulator's storm is no excuse.
func quotaShare(s *stack, e *emulator, from, to time.Time) second {
	return e.arr.totals(from, to, func(at time.Time) bool {
		return s.faults.inStorm(at, 5*time.Second, e.app.name) || s.faults.inStorm(at.Add(time.Second), 5*time.Second, e.app.name)
	})
}

// throughput is e's accepted sends per second over the seconds outside
// every fault's window (to lease + 5 s after it) in which a broadcast of
// its app was running: what the cluster sent for the app when it had work
// and nothing was wrong.
func throughput(s *stack, c *checker, e *emulator, from, to time.Time) (float64, int) {
	var accepted int64
	secs := 0
	for at := from.Truncate(time.Second).Add(time.Second); at.Add(time.Second).Before(to); at = at.Add(time.Second) {
		if !c.wasBusy(e.app.name, at) || s.faults.inWindow(at, s.cfg.lease+5*time.Second) || s.faults.inWindow(at.Add(time.Second), s.cfg.lease+5*time.Second) {
			continue
		}
		accepted += e.arr.totals(at, at.Add(time.Second), nil).accepted
		secs++
	}
	if secs == 0 {
		return 0, 0
	}
	return float64(accepted) / float64(secs), secs
}

// newReport is the run's table (markdown), its fault log and violations.
func newReport(s *stack, r *run, l *load, c *checker, loadEnd time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Chaos soak: CHAOS_DURATION=%v, CHAOS_SEED=%d\n\n", s.cfg.duration, s.cfg.seed)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "Ran %s → %s UTC; load average at the end: %s\n\n", r.t0.UTC().Format("2006-01-02 15:04:05"), time.Now().UTC().Format("15:04:05"), strings.TrimSpace(string(load)))
	var targets, succeeded, failed, canceled, capped int64
	statuses := map[string]int{}
	for _, x := range c.rows {
		targets += x.Targeted
		succeeded += x.Succeeded
		failed += x.Failed
		canceled += x.Canceled
		capped += x.Capped
		statuses[x.Status]++
	}
	b.WriteString("| what | result |\n|---|---|\n")
	fmt.Fprintf(&b, "| broadcasts (both apps) | %d (%s) |\n", len(c.rows), fmtCounts(statuses))
	l.mu.Lock()
	fmt.Fprintf(&b, "| submitted by kind | %s; cron fires %d; refused (4xx) %s |\n", fmtCounts(l.submitted), countCron(s), fmtCounts(l.refused))
	fmt.Fprintf(&b, "| opens posted back (POST /v1/events) | %d events, %d broadcasts |\n", l.events, len(l.opened))
	txns := append([]txnSend(nil), l.txn...)
	l.mu.Unlock()
	fmt.Fprintf(&b, "| targets (both apps) | %d: succeeded %d, failed %d, canceled %d, capped %d |\n", targets, succeeded, failed, canceled, capped)
	// An emulator fault's count says which emulators it hit.
	kinds, emus := map[string]int{}, map[string]map[string]int{}
	for _, f := range s.faults.snapshot() {
		kinds[f.kind]++
		if f.emulatorFault() {
			if emus[f.kind] == nil {
				emus[f.kind] = map[string]int{}
			}
			emus[f.kind][f.target]++
		}
	}
	var fk []string
	for _, k := range kindOrder {
		if kinds[k] > 0 {
			on := ""
			if emus[k] != nil {
				on = " (" + fmtCounts(emus[k]) + ")"
			}
			fk = append(fk, fmt.Sprintf("%s %d%s", k, kinds[k], on))
		}
	}
	fmt.Fprintf(&b, "| faults injected | %s |\n", strings.Join(fk, "; "))
	fmt.Fprintf(&b, "| violations | **%d** |\n", len(r.found()))
	fmt.Fprintf(&b, "| duplicate sends | %d, each charged to a fault; worst fault %s |\n", c.dups, worstFault(s))
	fmt.Fprintf(&b, "| frequency cap %s (capped_users) | %d broadcasts, %d targets capped; %d users sent; at most %d in one user's %v window by arrival (%d users over %d there, within the %v slack); %d two-device users split by a failure |\n",
		chaosCap, c.caps.broadcasts, c.caps.capped, c.caps.users, c.caps.mostInWindow, chaosCapWindow, c.caps.withinSlack, chaosCapN, capSlack, c.caps.splitDevices)
	fmt.Fprintf(&b, "| late checkpoints of a stalled holder whose chunk a cancel closed (their sends moved out of canceled; the replicas' logs) | %d |\n", countLogLines(s.dir, lateHolderLog))
	fmt.Fprintf(&b, "| checkpoints of a holder fenced off by a takeover, its sends stored aside for a cancel's close (the replicas' logs) | %d |\n", countLogLines(s.dir, fencedLog))
	var unheard, takenOver int
	_ = s.db.QueryRow("SELECT COUNT(*) FROM late_holders WHERE unsent IS NULL").Scan(&unheard)
	_ = s.db.QueryRow("SELECT COUNT(*) FROM late_holders WHERE unsent IS NOT NULL").Scan(&takenOver)
	fmt.Fprintf(&b, "| chunks a cancel closed under a stalled holder that never reported back (killed) | %d |\n", unheard)
	fmt.Fprintf(&b, "| chunks a takeover changed hands that a cancel closed (their fenced holders' sends counted target by target) | %d |\n", takenOver)
	fmt.Fprintf(&b, "| targets delivered but counted canceled (a killed holder's: charged to the kill, any other is a violation) | %d%s |\n", c.canceledDelivered, byKind(c.canceledDeliveredBy))
	fmt.Fprintf(&b, "| longest time to final (from submit, release or local time due) | %v (broadcast %d) |\n", c.longestFinal.Round(100*time.Millisecond), c.longestFinalID)
	if st := s.probe.longest(); st.late > 0 {
		fmt.Fprintf(&b, "| the checker's longest stall (its clock stamps the emulators' arrivals) | %v, ending at %s |\n", st.late.Round(time.Millisecond), st.end.Sub(r.t0).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "| longest a running broadcast went without an outcome (after the last fault) | %v (broadcast %d; limit lease + 30 s = %v) |\n", c.longestStall.Round(time.Second), c.longestStallID, s.cfg.lease+30*time.Second)
	for _, e := range s.emus {
		appLines(&b, s, r, c, e, txns, loadEnd)
	}
	got, twice := s.sink.received()
	fmt.Fprintf(&b, "| webhook events | %d delivered (%d more than once) |\n", len(got), twice)
	fmt.Fprintf(&b, "| COMMITs faulted by the proxy | %d answer lost, %d never arrived |\n", s.proxy.AppliedLost.Load(), s.proxy.NotForwarded.Load())
	b.WriteString("\nFault log (seconds from the start):\n\n```\n" + s.faults.text(r.t0) + "```\n")
	if vs := r.found(); len(vs) > 0 {
		b.WriteString("\nViolations:\n\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "- at %v, broadcast %d: %s\n", v.at.Round(time.Millisecond), v.broadcast, v.what)
			if x, ok := c.rows[v.broadcast]; ok {
				fmt.Fprintf(&b, "  - broadcast %d: %+v\n", v.broadcast, x)
			}
		}
	}
	return b.String()
}

// appLines are the report's lines of e's app: its broadcasts and targets,
// its emulator's sends, its quota and its transactional sends.
func appLines(b *strings.Builder, s *stack, r *run, c *checker, e *emulator, txns []txnSend, loadEnd time.Time) {
	app := e.app.name
	statuses := map[string]int{}
	var n, targets, succeeded, failed, canceled, capped int64
	for _, x := range c.rows {
		if x.App != app {
			continue
		}
		n++
		targets += x.Targeted
		succeeded += x.Succeeded
		failed += x.Failed
		canceled += x.Canceled
		capped += x.Capped
		statuses[x.Status]++
	}
	fmt.Fprintf(b, "| **app %s** (project %s, %.0f/s): broadcasts | %d (%s) |\n", app, e.app.project, e.app.rate, n, fmtCounts(statuses))
	fmt.Fprintf(b, "| app %s: targets | %d: succeeded %d, failed %d, canceled %d, capped %d |\n", app, targets, succeeded, failed, canceled, capped)
	distinct, repeats, unattributed := e.arr.accounted()
	all := e.arr.totals(r.t0, time.Now().Add(time.Second), nil)
	fmt.Fprintf(b, "| app %s: sends at %s | %d requests; %d accepted = %d distinct (broadcast, target) + %d repeats + %d without an event token |\n",
		app, e.target(), all.requests, e.emu.Stats().Accepted, distinct, repeats, unattributed)
	busiest, busiestAt := e.arr.busiestWindow(s.cfg.quotaWindow)
	allowed, stalled := quotaWithSlack(s.cfg, e.app), ""
	if withLead, lead := quotaAllowance(s.cfg, e.app, s.probe, busiestAt); busiest > allowed && lead > 0 {
		allowed = withLead
		stalled = fmt.Sprintf(", with the checker's own %v stall at its start", lead.Round(time.Millisecond))
	}
	fmt.Fprintf(b, "| app %s: busiest sliding %v window at %s (the quota counts all but 429s) | %d requests from %s = %.1f%% of its quota %d (allowed %d%s) |\n",
		app, s.cfg.quotaWindow, e.target(), busiest, busiestAt.Sub(r.t0).Round(time.Millisecond), 100*float64(busiest)/float64(quotaOf(s.cfg, e.app)), quotaOf(s.cfg, e.app), allowed, stalled)
	q := quotaShare(s, e, r.t0, time.Now())
	fmt.Fprintf(b, "| app %s: 429s outside its emulator's storms | %d of %d requests (%.3f%%) |\n", app, q.limited, q.requests, 100*float64(q.limited)/float64(max(q.requests, 1)))
	tp, secs := throughput(s, c, e, r.t0, loadEnd)
	fmt.Fprintf(b, "| app %s: throughput outside faults, while busy | %.0f sends/s = %.0f%% of its quota (%.0f/s), over %d s |\n", app, tp, 100*tp/e.app.rate, e.app.rate, secs)
	var txn, slow, slowOut int
	var txnMax time.Duration
	for _, x := range txns {
		if x.app != app {
			continue
		}
		txn++
		txnMax = max(txnMax, x.took)
		if x.took > 2*time.Second || !x.ok {
			slow++
			if !s.faults.excuses(x.at, txnGrace, app) && !s.faults.excuses(x.at.Add(x.took), txnGrace, app) {
				slowOut++
			}
		}
	}
	fmt.Fprintf(b, "| app %s: transactional sends (1–3 users) | %d, slowest %v; over 2 s or failed: %d, of which outside the windows of the faults that touch the app: %d |\n", app, txn, txnMax.Round(time.Millisecond), slow, slowOut)
}

func worstFault(s *stack) string {
	var worst *fault
	for _, f := range s.faults.snapshot() {
		if f.bound > 0 && (worst == nil || float64(f.dups)/float64(f.bound) > float64(worst.dups)/float64(worst.bound)) {
			worst = &f
		}
	}
	if worst == nil {
		return "none"
	}
	return fmt.Sprintf("%s of %s: %d of its bound %d", worst.kind, worst.target, worst.dups, worst.bound)
}

func countCron(s *stack) int {
	var n int
	_ = s.db.QueryRow("SELECT COUNT(*) FROM broadcasts WHERE job_name = ?", cronJob).Scan(&n)
	return n
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// lateHolderLog is what a replica logs at a late holder's checkpoint
// (broadcast/run, chunkrun.go).
const lateHolderLog = "its sends since the last checkpoint were stored all the same"

// fencedLog is what a replica logs when a takeover fenced it off and its
// checkpoint's sends were stored aside (broadcast/run, lease fenced.go).
const fencedLog = "its sends since the last checkpoint were stored aside for a cancel to count"

// countLogLines counts the lines holding what in the replicas' logs.
func countLogLines(dir, what string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += strings.Count(string(raw), what)
	}
	return n
}

// byKind is ": n kind, …" in the fault kinds' order; "" for none.
func byKind(m map[string]int64) string {
	var parts []string
	for _, k := range kindOrder {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", m[k], k))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
