package chaos

import (
	"net/http"
	"testing"
	"time"
)

// TestAQuotaWindowIsAllowedOnlyTheCheckersOwnStall: a window over the quota
// and its slack passes only by the sends that a stall of the checker at
// its start can have moved into it, and not one more.
func TestAQuotaWindowIsAllowedOnlyTheCheckersOwnStall(t *testing.T) {
	apps := soakApps()
	t0 := time.Now()
	const w = 10 * time.Second
	// 100 sends a second for 10 s, plus 30 stamped in the window's first
	// millisecond: 1,030 in the window from t0.
	fill := func(a *arrivals) {
		for i := range 1000 {
			at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
			a.record(at, at, http.StatusOK, "/v1/projects/chaos/messages:send", []byte(`{"message":{"token":"c-1"}}`))
		}
		for range 30 {
			a.record(t0, t0, http.StatusOK, "/v1/projects/chaos/messages:send", []byte(`{"message":{"token":"c-1"}}`))
		}
	}
	// An app at 100/s, a 10 s window: a quota of 1,000, 1,010 with the slack.
	cfg, app := runConfig{quotaWindow: w}, appSpec{rate: 100}
	base := quotaWithSlack(cfg, app)
	allowedBy := func(p *stallProbe) func(time.Time) int {
		return func(from time.Time) int { n, _ := quotaAllowance(cfg, app, p, from); return n }
	}

	a := newArrivals(apps[0], apps)
	fill(a)
	n, allowed, from, over := a.overQuota(w, base, allowedBy(&stallProbe{}))
	if !over || n != 1030 || allowed != base || !from.Equal(t0) {
		t.Fatalf("with no stall: over %v, %d requests from %v, %d allowed; want over, 1030 from t0, %d allowed", over, n, from.Sub(t0), allowed, base)
	}

	// A 250 ms stall ending 50 ms into the window: 200 ms of sends (20)
	// may have come before it; 1,030 is still 0 over 1,010 + 20.
	p := &stallProbe{stalls: []stall{{end: t0.Add(50 * time.Millisecond), late: 250 * time.Millisecond}}}
	if n, allowed, _, over := a.overQuota(w, base, allowedBy(p)); over {
		t.Fatalf("a 200 ms lead excuses 20 sends: %d requests against %d allowed were flagged", n, allowed)
	}

	// The same stall ending 150 ms in: a lead of 100 ms, 10 sends; 10 over.
	p = &stallProbe{stalls: []stall{{end: t0.Add(150 * time.Millisecond), late: 250 * time.Millisecond}}}
	if n, allowed, _, over := a.overQuota(w, base, allowedBy(p)); !over || n != 1030 || allowed != base+10 {
		t.Fatalf("a 100 ms lead: over %v, %d requests, %d allowed; want over, 1030 against %d", over, n, allowed, base+10)
	}

	// A stall before the window, or one shorter than its distance into
	// it, moves nothing into it.
	for _, st := range []stall{{end: t0.Add(-time.Millisecond), late: time.Second}, {end: t0.Add(time.Second), late: 900 * time.Millisecond}} {
		p := &stallProbe{stalls: []stall{st}}
		if lead := p.lead(t0, w); lead != 0 {
			t.Errorf("a stall of %v ending %v from the window's start gave a lead of %v, want 0", st.late, st.end.Sub(t0), lead)
		}
	}
}
