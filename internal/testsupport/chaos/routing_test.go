package chaos

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The checker's per-app rules, without a soak: they run in make test, so a
// rule that could never fire is caught there, not after a 30-minute run.

// TestArrivalsFlagASendForAnotherApp: the default app's emulator records a
// request under the partner's project path, and one carrying a partner
// token, as misrouted; its own sends pass.
func TestArrivalsFlagASendForAnotherApp(t *testing.T) {
	apps := soakApps()
	a := newArrivals(apps[0], apps)
	body := func(token string) []byte { return []byte(`{"message":{"token":"` + token + `"}}`) }
	now := time.Now()
	a.record(now, now, http.StatusOK, "/v1/projects/chaos/messages:send", body("c-17"))
	a.record(now, now, http.StatusOK, "/v1/projects/chaos/messages:send", body("unregistered-c-100"))
	a.record(now, now, http.StatusTooManyRequests, "/v1/projects/chaos/messages:send", body("c2-10"))
	if ms, _ := a.misroutes(0); len(ms) != 0 {
		t.Fatalf("the default app's own sends were flagged: %+v", ms)
	}
	a.record(now, now, http.StatusOK, "/v1/projects/chaos-partner/messages:send", body("c-17"))
	a.record(now, now, http.StatusTooManyRequests, "/v1/projects/chaos/messages:send", body("p-100004"))
	a.record(now, now, http.StatusOK, "/v1/projects/chaos/messages:send", body("someone-elses"))
	ms, next := a.misroutes(0)
	if len(ms) != 3 || next != 3 {
		t.Fatalf("want 3 misrouted requests (another project's path, a partner token, an unknown token), got %d: %+v", len(ms), ms)
	}
	for i, want := range []string{"/v1/projects/chaos-partner/messages:send", `"p-100004" (app "partner")`, `"someone-elses" (app "")`} {
		if !strings.Contains(ms[i].what, want) {
			t.Errorf("misroute %d: %q does not name %s", i, ms[i].what, want)
		}
	}
}

// TestEmulatorFaultExcusesItsOwnAppOnly: a storm of the partner's
// emulator excuses neither a slow send of the default app nor the
// default emulator's 429s; a kill excuses both apps, the webhook receiver
// going away neither.
func TestEmulatorFaultExcusesItsOwnAppOnly(t *testing.T) {
	t0 := time.Now()
	l := &faultLog{}
	storm := l.beginOn(kindStorm, "emu:partner", "5s", 0, []string{partnerApp})
	storm.start, storm.end = t0, t0.Add(5*time.Second)
	hook := l.begin(kindHookAway, "sink", "5s", 0)
	hook.start, hook.end = t0.Add(time.Minute), t0.Add(time.Minute+5*time.Second)
	kill := l.begin(kindKill, "replica-a", "", 100)
	kill.start, kill.end = t0.Add(2*time.Minute), t0.Add(2*time.Minute+time.Second)
	spike := l.beginOn(kindLatency, "emu:partner", "3s", 0, []string{partnerApp})
	spike.start, spike.end = kill.start, kill.start.Add(3*time.Second)

	for _, c := range []struct {
		at          time.Duration
		app         string
		excused     bool
		stormWindow bool
	}{
		{2 * time.Second, partnerApp, true, true},
		{2 * time.Second, defaultApp, false, false},
		{time.Minute + 2*time.Second, defaultApp, false, false},
		{time.Minute + 2*time.Second, partnerApp, false, false},
		{2*time.Minute + 500*time.Millisecond, defaultApp, true, false},
		{2*time.Minute + 500*time.Millisecond, partnerApp, true, false},
	} {
		at := t0.Add(c.at)
		if got := l.excuses(at, time.Second, c.app); got != c.excused {
			t.Errorf("at %v, app %s: excused %v, want %v", c.at, c.app, got, c.excused)
		}
		if got := l.inStorm(at, time.Second, c.app); got != c.stormWindow {
			t.Errorf("at %v, app %s: in a storm of its emulator %v, want %v", c.at, c.app, got, c.stormWindow)
		}
	}
	// The partner's latency spike during the kill lengthens the kill's
	// window by its 3 s for the partner's repeats only.
	to, now := kill.end.Add(time.Second), kill.end.Add(time.Minute)
	if got := l.heldBy(kill.start, to, now, partnerApp); !got.Equal(to.Add(3 * time.Second)) {
		t.Errorf("the partner's repeats: window to %v after the kill's end, want 4s", got.Sub(kill.end))
	}
	if got := l.heldBy(kill.start, to, now, defaultApp); !got.Equal(to) {
		t.Errorf("the default app's repeats: window to %v after the kill's end, want 1s (the partner's spike does not hold them)", got.Sub(kill.end))
	}
}

// A kill's repeats that wait out a 429 storm wait for the ramp after it
// too: the window is lengthened by the storm and by PUSHFAN_RAMP_UP (seed
// 4242's repeat came 8 s after the storm's end, 16.7 s after the takeover).
func TestAStormHoldsAKillsRepeatsForItsRampToo(t *testing.T) {
	l := &faultLog{}
	t0 := time.Now()
	kill := l.begin(kindKill, "replica-b", "", 300)
	kill.start, kill.end = t0, t0.Add(600*time.Millisecond)
	storm := l.beginOn(kindStorm, "emulator", "", 0, []string{defaultApp})
	storm.start, storm.end = t0.Add(10800*time.Millisecond), t0.Add(18700*time.Millisecond)
	after := 15 * time.Second // lease + 5 s
	repeat := t0.Add(26660 * time.Millisecond)
	if kind, ok := l.chargeOf(repeat, after, defaultApp); !ok || kind != kindKill {
		t.Fatalf("the takeover's repeat 8 s after the storm: charged %q %v, want to the kill", kind, ok)
	}
	late := kill.end.Add(after + storm.end.Sub(storm.start) + stormRampUp + time.Second)
	if kind, ok := l.chargeOf(late, after, defaultApp); ok {
		t.Fatalf("a repeat past the storm and its ramp: charged to %q, want no fault to explain it", kind)
	}
}
