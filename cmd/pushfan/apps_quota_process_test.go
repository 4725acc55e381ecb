//go:build !race

package main

import (
	"net/http"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// One app's large bulk broadcast at its quota does not hold another app:
// a broadcast of the other app, submitted while the bulk runs, completes
// while the bulk is still running (it is not queued behind it), and again
// while a 429 storm pauses the bulk app's project (a 429 from one project
// pauses that project only). Each app's emulator enforces its app's quota.
//
// The rates are logged, not asserted: this is a shared 2-vCPU machine.
// make bench-apps measures them (per-app sustained sends/s against each
// quota).
func TestBulkOfOneAppDoesNotHoldAnother(t *testing.T) {
	const (
		rate          = 2000
		window        = 10 * time.Second
		nBulk, nOther = 24000, 2000
		storm         = 10 * time.Second
	)
	quota := fcmemu.Config{QuotaLimit: rate * int(window/time.Second), QuotaWindow: window}
	s := newAppsStack(t, []appSpec{
		{name: "bulk", project: "acme-bulk", rateLimit: rate, emu: quota},
		{name: "other", project: "acme-other", rateLimit: rate, emu: quota},
	}, "PUSHFAN_RATE_WINDOW="+window.String())
	s.seedTokens("bulk", "btok-", nBulk)
	otherToks := s.seedTokens("other", "otok-", nOther)
	p := s.start("apps")
	bulkEmu, otherEmu := s.emus["bulk"], s.emus["other"]

	a := submitApp(t, p, "bulk", "bulk")
	teststack.WaitEvery(t, "the bulk app's emulator to accept 10% of its broadcast (the bulk is under way)", time.Minute, 20*time.Millisecond,
		func() bool { return bulkEmu.total() >= nBulk/10 })

	// The other app's broadcast, beside the bulk.
	aAt0, t0 := bulkEmu.total(), time.Now()
	b1 := submitApp(t, p, "other", "beside the bulk")
	b1f := waitBroadcastEnd(t, p, b1.ID, time.Minute)
	aAt1, t1 := bulkEmu.total(), time.Now()
	if b1f.Status != "completed" || b1f.Succeeded != nOther {
		t.Fatalf("the other app's broadcast beside the bulk: %+v, want %d completed", b1f.Broadcast, nOther)
	}
	if ab := getBroadcast(t, p, a.ID); ab.Status != "running" || aAt1 >= nBulk {
		t.Fatalf("the bulk broadcast is %s (%d of %d accepted) once the other app's ended: the other was queued behind it, not beside it", ab.Status, aAt1, nBulk)
	}
	took := t1.Sub(t0)
	t.Logf("beside a bulk broadcast of app bulk at its quota %d/s: app other's %d tokens completed in %v (%.0f/s over the whole submit-to-end); app bulk sent %.0f/s meanwhile",
		rate, nOther, took.Round(time.Millisecond), float64(nOther)/took.Seconds(), float64(aAt1-aAt0)/took.Seconds())

	// A 429 storm on the bulk app's project: its sends pause, the other
	// app's do not.
	cfg := bulkEmu.emu.Config()
	cfg.StormAfter, cfg.StormFor = 0, storm
	if err := bulkEmu.emu.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	var stormEnds time.Time
	teststack.WaitEvery(t, "the 429 storm on the bulk app's emulator to start", 10*time.Second, 10*time.Millisecond, func() bool {
		st := bulkEmu.emu.Stats()
		if st.StormEndsAt != nil {
			stormEnds = *st.StormEndsAt
		}
		return st.StormEndsAt != nil
	})
	otherBefore := otherEmu.total()
	b2 := submitApp(t, p, "other", "during the storm")
	b2f := waitBroadcastEnd(t, p, b2.ID, storm+30*time.Second)
	b2End := time.Now()
	if b2f.Status != "completed" || b2f.Succeeded != nOther {
		t.Fatalf("the other app's broadcast during the storm: %+v, want %d completed", b2f.Broadcast, nOther)
	}
	if !b2End.Before(stormEnds) {
		t.Fatalf("the other app's broadcast ended %v after the 429 storm on the bulk app's project did: the storm paused the other app too",
			b2End.Sub(stormEnds).Round(time.Millisecond))
	}
	if ab := getBroadcast(t, p, a.ID); ab.Status != "running" {
		t.Fatalf("the bulk broadcast is %s during its storm", ab.Status)
	}
	t.Logf("during a %v 429 storm on app bulk's project: app other's %d tokens completed %v before the storm ended (%d sent)",
		storm, nOther, stormEnds.Sub(b2End).Round(time.Millisecond), otherEmu.total()-otherBefore)

	af := waitBroadcastEnd(t, p, a.ID, 2*time.Minute)
	if af.Status != "completed" || af.Targeted != nBulk || af.Succeeded+af.Failed != nBulk {
		t.Fatalf("the bulk broadcast: %+v, want %d completed", af.Broadcast, nBulk)
	}
	// Every send exactly from the emulators: the other app's tokens twice
	// each under its project, and the bulk app's tokens under its own,
	// each at most once, as many as succeeded.
	s.checkOnlyTo("other", "acme-other", otherToks, 2)
	accepted, requests := bulkEmu.snapshot()
	for tok, byProject := range accepted {
		if len(byProject) != 1 || byProject["acme-bulk"] != 1 || len(tok) < 5 || tok[:5] != "btok-" {
			t.Fatalf("the bulk app's emulator accepted token %s %v: want each of its own tokens once, under acme-bulk", tok, byProject)
		}
	}
	if int64(len(accepted)) != af.Succeeded || len(requests) != 1 {
		t.Fatalf("the bulk app's emulator accepted %d tokens under projects %v, the broadcast counts %d succeeded", len(accepted), requests, af.Succeeded)
	}
	st := bulkEmu.emu.Stats()
	if st.RequestsDuringProjectBackoff > 0 {
		t.Fatalf("%d requests reached the bulk app's project while a 429's Retry-After told clients to stay away", st.RequestsDuringProjectBackoff)
	}
	if ost := otherEmu.emu.Stats(); ost.ByCode["RATE_LIMIT_EXCEEDED"] > 0 {
		t.Logf("note: the other app's emulator answered %d quota 429s", ost.ByCode["RATE_LIMIT_EXCEEDED"])
	}
	var sum statsView
	doJSON(t, p.URL, appsToken, "GET", "/push/stats?app=other", "", http.StatusOK, &sum)
	if sum.Broadcasts != 2 || sum.Succeeded != 2*nOther {
		t.Fatalf("GET /push/stats?app=other: %+v, want its 2 broadcasts of %d", sum, nOther)
	}
	t.Logf("the bulk: %d tokens, %d succeeded, %d failed in %d ms (%d quota and storm 429s)",
		nBulk, af.Succeeded, af.Failed, *af.DurationMS, st.ByCode["RATE_LIMIT_EXCEEDED"])
}
