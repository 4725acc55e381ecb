package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"pushfan/config"
)

// Fault kinds.
const (
	kindKill        = "kill -9 + restart"
	kindPause       = "SIGSTOP/SIGCONT > lease"
	kindDBCut       = "DB connections cut"
	kindCommitFault = "COMMITs faulted (lost answer / never arrived)"
	kindDBOutage    = "DB refused for seconds (restart simulated)"
	kindDBRestart   = "DB server restarted (SIGTERM or SIGKILL, then start)"
	kindStorm       = "429 storm"
	kindLatency     = "latency spike 500 ms"
	kindUnavailable = "UNAVAILABLE burst"
	kindHookAway    = "webhook receiver away"
)

var kindOrder = []string{kindKill, kindPause, kindDBCut, kindCommitFault, kindDBRestart, kindDBOutage, kindStorm, kindLatency, kindUnavailable, kindHookAway}

// fault is one injected fault: its kind, what it hit, when it started and
// ended (zero while on), and the duplicates it may explain (bound) and was
// charged with (dups). An emulator fault names the apps whose emulators
// it hit (emus); the other faults hit every app.
type fault struct {
	kind, target, detail string
	emus                 []string
	start, end           time.Time
	bound, dups          int64
}

// emulatorFault reports whether f is an emulator's (a storm, a latency
// spike, an UNAVAILABLE burst).
func (f *fault) emulatorFault() bool {
	return f.kind == kindStorm || f.kind == kindLatency || f.kind == kindUnavailable
}

// touches reports whether f may slow app's sends: an emulator fault only
// its own apps', a fault of the replicas or the database every app's. The
// webhook receiver going away slows no send.
func (f *fault) touches(app string) bool {
	switch {
	case f.emulatorFault():
		return contains(f.emus, app)
	case f.kind == kindHookAway:
		return false
	}
	return true
}

// faultLog is every fault of the run, in the order they started.
type faultLog struct {
	mu     sync.Mutex
	faults []*fault
}

func (l *faultLog) begin(kind, target, detail string, bound int64) *fault {
	return l.beginOn(kind, target, detail, bound, nil)
}

// beginOn begins a fault of the emulators of apps emus.
func (l *faultLog) beginOn(kind, target, detail string, bound int64, emus []string) *fault {
	f := &fault{kind: kind, target: target, detail: detail, emus: emus, start: time.Now(), bound: bound}
	l.mu.Lock()
	l.faults = append(l.faults, f)
	l.mu.Unlock()
	return f
}

// finish ends f; a detail known only at the end (how long a replica was
// down) replaces the one given at the start. bound, when given, computes
// the fault's duplicate bound from its start and end.
func (l *faultLog) finish(f *fault, detail string, bound func(from, to time.Time) int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.end = time.Now()
	if detail != "" {
		f.detail = detail
	}
	if bound != nil {
		f.bound = bound(f.start, f.end)
	}
}

// lastTouch is when the latest fault ended, now while one is on: a
// broadcast's time to final is measured from it.
func (l *faultLog) lastTouch(now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, f := range l.faults {
		end := f.end
		if end.IsZero() {
			end = now
		}
		if end.After(last) {
			last = end
		}
	}
	return last
}

// inWindow reports whether at falls in a fault's window: from its start
// to after its end by after (for which kinds: all when kinds is empty).
func (l *faultLog) inWindow(at time.Time, after time.Duration, kinds ...string) bool {
	return l.inWindowOf(at, after, func(f *fault) bool { return len(kinds) == 0 || contains(kinds, f.kind) })
}

// excuses reports whether at falls in the window of a fault that may slow
// app's sends (fault.touches): a storm of the other app's emulator does
// not excuse a slow transactional send of this one.
func (l *faultLog) excuses(at time.Time, after time.Duration, app string) bool {
	return l.inWindowOf(at, after, func(f *fault) bool { return f.touches(app) })
}

// inStorm reports whether at falls in the window of a 429 storm of app's
// emulator.
func (l *faultLog) inStorm(at time.Time, after time.Duration, app string) bool {
	return l.inWindowOf(at, after, func(f *fault) bool { return f.kind == kindStorm && contains(f.emus, app) })
}

// inWindowOf is inWindow for the faults keep keeps.
func (l *faultLog) inWindowOf(at time.Time, after time.Duration, keep func(*fault) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.faults {
		if !keep(f) {
			continue
		}
		end := f.end
		if end.IsZero() {
			end = at
		}
		if !at.Before(f.start.Add(-time.Second)) && !at.After(end.Add(after)) {
			return true
		}
	}
	return false
}

// charge assigns a duplicate of app's at `at` to the fault covering it
// (its window ending `after` past its end) with a bound and the most room
// left; false when no fault explains it.
func (l *faultLog) charge(at time.Time, after time.Duration, app string) bool {
	_, ok := l.chargeOf(at, after, app)
	return ok
}

// chargeOf is charge restricted to the faults of kinds (all when empty);
// it names the kind of the fault charged.
func (l *faultLog) chargeOf(at time.Time, after time.Duration, app string, kinds ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *fault
	for _, f := range l.faults {
		if len(kinds) > 0 && !contains(kinds, f.kind) {
			continue
		}
		end := f.end
		if end.IsZero() {
			end = at
		}
		if f.bound == 0 || at.Before(f.start.Add(-time.Second)) || at.After(l.heldBy(f.start, end.Add(after), at, app)) {
			continue
		}
		if best == nil || f.bound-f.dups > best.bound-best.dups {
			best = f
		}
	}
	if best == nil {
		return "", false
	}
	best.dups++
	return best.kind, true
}

// heldBy extends a charging window [from, to] by every fault of app's
// emulator that overlaps it (a 429 storm, a latency spike, an UNAVAILABLE
// burst): the sends it repeats (a takeover's, after a kill) wait out the
// storm's 429s or the slow answers, so they come that much later. After a
// storm they wait for the ramp as well: the senders come back at 10 % of
// the rate and climb to all of it over PUSHFAN_RAMP_UP, with the storm's
// backlog of every broadcast ahead of them (a 30-minute run, seed 4242,
// found a kill's repeat 8 s past a storm's end, 3 s past a window that
// ended with the storm's length added). Another app's emulator faults do
// not hold app's sends. A fault still on counts until now. l.mu is held.
func (l *faultLog) heldBy(from, to, now time.Time, app string) time.Time {
	for _, g := range l.faults {
		if !g.emulatorFault() || !contains(g.emus, app) {
			continue
		}
		end := g.end
		if end.IsZero() {
			end = now
		}
		if g.start.After(to) || end.Before(from) {
			continue
		}
		to = to.Add(end.Sub(g.start))
		if g.kind == kindStorm {
			to = to.Add(stormRampUp)
		}
	}
	return to
}

// stormRampUp is how long the replicas take to climb back to their full
// rate after a 429 pause: PUSHFAN_RAMP_UP, which the soak leaves at its
// default.
var stormRampUp = config.Defaults().Engine.RampUp

// overBound returns the faults charged with more duplicates than their bound.
func (l *faultLog) overBound() []fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fault
	for _, f := range l.faults {
		if f.dups > f.bound {
			out = append(out, *f)
		}
	}
	return out
}

func (l *faultLog) snapshot() []fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]fault, len(l.faults))
	for i, f := range l.faults {
		out[i] = *f
	}
	return out
}

// String is the fault log, one line a fault, times from t0.
func (l *faultLog) text(t0 time.Time) string {
	fs := l.snapshot()
	sort.Slice(fs, func(i, j int) bool { return fs[i].start.Before(fs[j].start) })
	var b strings.Builder
	for _, f := range fs {
		end := "on"
		if !f.end.IsZero() {
			end = fmt.Sprintf("%7.1fs", f.end.Sub(t0).Seconds())
		}
		fmt.Fprintf(&b, "  %7.1fs → %s  %-45s %-11s %s (duplicates %d of bound %d)\n",
			f.start.Sub(t0).Seconds(), end, f.kind, f.target, f.detail, f.dups, f.bound)
	}
	return b.String()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
