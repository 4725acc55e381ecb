package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// Zone membership is fixed when the audience is planned: a user who moves
// from a zone due in seconds to one due in an hour after the plan, and one
// who moves the other way, each get the broadcast once, at their planned
// zone's time, and are counted once. (When every chunk read its users'
// live zone, the first was never sent and the second sent an hour early.)
func TestAUserWhoChangesZoneAfterThePlanIsSentOnce(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	soon := seedZoned(t, s, 1, "zc-soon-", []string{"UTC", "UTC"})
	later := seedZoned(t, s, 3, "zc-later-", []string{"Etc/GMT+1", "Etc/GMT+1"})
	due := time.Now().UTC().Add(4 * time.Second).Truncate(time.Second)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": map[string]any{"all": true},
		"send_at_local": due.Format("2006-01-02T15:04:05")}, &b)
	if p := s.WaitPlanned(b.ID, 10*time.Second); p.Targeted != 4 || waiting(p) != 4 {
		t.Fatalf("planned %+v, want 4 targets waiting", p)
	}
	// User 1 moves an hour away; user 3 into the zone due in seconds.
	s.MustExec("UPDATE users SET timezone = 'Etc/GMT+1' WHERE id = 1")
	s.MustExec("UPDATE users SET timezone = 'UTC' WHERE id = 3")
	waitUntil(t, "the zone due in seconds delivered", 20*time.Second, func() bool { return accepted(s, soon, 1) })
	waitUntil(t, "succeeded 2 checkpointed", 10*time.Second, func() bool { return getBroadcast(s, b.ID).Succeeded == 2 })
	assertNone(t, s, "the zone an hour away (user 3 moved into the due one after the plan)", later)
	var c teststack.Broadcast
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c)
	if c.Status != "canceled" || c.Succeeded != 2 || c.Canceled != 2 || c.Targeted != 4 {
		t.Fatalf("canceled %+v, want 2 sent and 2 canceled, each user once", c)
	}
	if !accepted(s, soon, 1) {
		t.Fatal("a token of the zone due in seconds got a second message")
	}
	assertNone(t, s, "the zone an hour away, after the cancel", later)
}

// A waiting request that cannot finish within the wait window answers
// 202 at once instead of holding the caller for the whole window: zones
// that are not due yet, a deliver_over that ends after it, a pace too
// slow for it. One that can finish still waits and answers 200.
func TestASyncWaitThatCannotFinishAnswersAtOnce(t *testing.T) {
	const window = 40 * time.Second
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.HTTP.WaitTimeout = window }})
	s.SeedTokens(1, tokens("sw-", 200))
	all := map[string]any{"all": true}
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"send_at_local tomorrow", map[string]any{"title": "t", "audience": all, "send_at_local": tomorrowNoon()}},
		{"deliver_over 10m", map[string]any{"title": "t", "audience": all, "deliver_over": "10m"}},
		{"max_rate 1 for 200 targets", map[string]any{"title": "t", "audience": all, "max_rate": 1}},
	} {
		var b teststack.Broadcast
		start := time.Now()
		resp := s.Do("POST", "/push/broadcast", tc.body, &b)
		took := time.Since(start)
		if resp.StatusCode != http.StatusAccepted || b.Final() {
			t.Fatalf("%s: %d %+v, want 202", tc.name, resp.StatusCode, b)
		}
		// Half the window is slack for a loaded machine: a wait that held
		// the request would take the whole window.
		if took > window/2 {
			t.Fatalf("%s: answered after %v: the request waited for a broadcast that cannot finish within %v", tc.name, took, window)
		}
		t.Logf("%s: 202 after %v", tc.name, took.Round(time.Millisecond))
		start = time.Now()
		s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
		t.Logf("%s: canceled in %v", tc.name, time.Since(start).Round(time.Millisecond))
	}
	var done teststack.Broadcast
	start := time.Now()
	defer func() { t.Logf("the last: %+v after %v", done, time.Since(start)) }()
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "audience": all}, &done); resp.StatusCode != http.StatusOK ||
		done.Status != "completed" || done.Succeeded != 200 {
		t.Fatalf("a broadcast that can finish: %d %+v, want 200 and completed", resp.StatusCode, done)
	}
}

// Cancel is final within the request in every state without a chunk
// running: planning (no instance has planned it yet), held, scheduled;
// and running ones end at their next checkpoints. The counts add up.
func TestCancelIsFinalInEveryState(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.PlanParallel = 0 }})
	s.SeedTokens(1, tokens("cs-", 500))
	all := map[string]any{"all": true}
	cancel := func(what string, id uint64, wantTargeted int64) {
		t.Helper()
		var c teststack.Broadcast
		if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", id), nil, &c); resp.StatusCode != http.StatusOK ||
			c.Status != "canceled" || c.Succeeded+c.Failed+c.Canceled != c.Targeted || c.Targeted != wantTargeted || c.FinishedAt == nil {
			t.Fatalf("%s: cancel answered %d %+v, want canceled at once, %d targets counted", what, resp.StatusCode, c, wantTargeted)
		}
	}
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": all}, &b)
	if b.Status != "planning" {
		t.Fatalf("submit: %+v, want planning (no instance here plans)", b)
	}
	cancel("planning", b.ID, 0)
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": all, "send_at": time.Now().Add(time.Hour).Format(time.RFC3339)}, &b)
	cancel("scheduled", b.ID, 0)
	held := hold(t, s, teststack.AdminToken, 500, nil)
	cancel("held", held.ID, 500)

	// Running, paced, on an instance that plans: it ends at its chunks'
	// next checkpoints, its unsent targets counted from the plan.
	planner := s.AddInstanceWith(func(c *config.Config) { c.Engine.PlanParallel = 2 })
	s.DoURL(planner.API.URL, "POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": all, "max_rate": 50}, &b)
	waitUntil(t, "the paced broadcast sending", 20*time.Second, func() bool { return getBroadcast(s, b.ID).Succeeded > 0 })
	var c teststack.Broadcast
	start := time.Now()
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c)
	if c.Status != "canceled" || c.Targeted != 500 || c.Succeeded+c.Canceled != 500 || c.Succeeded >= 500 {
		t.Fatalf("running: cancel answered %+v after %v, want canceled with every target counted", c, time.Since(start))
	}
	t.Logf("a running paced broadcast canceled in %v (%d sent)", time.Since(start).Round(time.Millisecond), c.Succeeded)
	if st := s.Emu.Stats(); st.Accepted != c.Succeeded {
		t.Fatalf("the emulator accepted %d, the broadcast counts %d succeeded", st.Accepted, c.Succeeded)
	}
}

// One broadcast that cannot be planned (its stored audience is broken)
// fails alone, with the reason, after a bounded number of attempts; the
// scheduled broadcasts due with it are planned and sent, and the other
// sweeps (holds expiring) go on. (Promotion used to plan the 20 oldest due
// rows in one transaction: one bad row stopped every promotion, and with
// it the hold expiry and recovery sweeps, cluster-wide, for ever.)
func TestOneBroadcastThatCannotBePlannedFailsAlone(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.PlanRetry = 50 * time.Millisecond }})
	toks := tokens("pd-", 50)
	s.SeedTokens(1, toks)
	// A row an older version (or a hand-made import) stored: an audience
	// that sets both all and user_ids, which no plan can read.
	s.MustExec(`INSERT INTO broadcasts (id, status, message, audience, send_at, starts_at)
		VALUES (7000, 'scheduled', '{"title":"bad"}', '{"all":true,"user_ids":[1]}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)
	var good teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "good", "audience": map[string]any{"all": true},
		"send_at": time.Now().Add(time.Second).Format(time.RFC3339Nano)}, &good)
	expiring := hold(t, s, teststack.AdminToken, 50, nil)
	s.MustExec("UPDATE broadcasts SET hold_expires_at = UTC_TIMESTAMP(6) WHERE id = ?", expiring.ID)

	done := s.WaitFinished(good.ID, 30*time.Second)
	if done.Status != "completed" || done.Succeeded != 50 {
		t.Fatalf("the good scheduled broadcast: %+v", done)
	}
	bad := s.WaitFinished(7000, 30*time.Second)
	if bad.Status != "failed" || bad.Error == nil || !strings.Contains(*bad.Error, "planning the audience failed 5 times") ||
		!strings.Contains(*bad.Error, "both all and user_ids") {
		t.Fatalf("the broken broadcast: %+v, want failed with the reason", bad)
	}
	if h := s.WaitFinished(expiring.ID, 10*time.Second); h.Status != "canceled" || h.Error == nil || *h.Error != "hold expired" {
		t.Fatalf("the expired hold: %+v", h)
	}
	if !accepted(s, toks, 1) {
		t.Fatal("want each token sent exactly once, by the good broadcast")
	}
}
