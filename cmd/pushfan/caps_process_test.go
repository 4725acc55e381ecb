//go:build !race

package main

import (
	"syscall"
	"testing"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
)

// kill -9 mid-broadcast with a cap of 1/day: two broadcasts race over the
// same users, the only instance is killed halfway and restarted. Every
// target is counted once (each user succeeded in one broadcast and capped
// in the other); every user got a message, so none is both capped and
// unsent (a reservation left by the kill was sent by the takeover); and
// the repeated sends stay within the documented bound. A repeat is
// counted per token beyond its first message: with the two broadcasts'
// succeeded adding up to the users and every user reached, a user who got
// both broadcasts would leave another with neither, so every repeat went
// to a user this broadcast was already sent to.
func TestKill9WithAFrequencyCapSendsEachUserOneBroadcast(t *testing.T) {
	const n = 20000
	e := newProcEnv(t, n, fcmemu.Config{})
	e.env = append(e.env, "PUSHFAN_FREQUENCY_CAP=1/day")
	const pod = "capped-0"
	a := e.startAs("capped", pod)
	first := e.call(a.URL, "POST", "/push/broadcast?wait=0", `{"title":"A","audience":{"all":true}}`)
	second := e.call(a.URL, "POST", "/push/broadcast?wait=0", `{"title":"B","audience":{"all":true}}`)
	e.waitAccepted(0.5)
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.WaitExit(t, "kill -9")
	r := e.startAs("restarted", pod)
	fa, fb := e.waitFinished(r, first.ID), e.waitFinished(r, second.ID)
	for _, f := range []broadcastView{fa, fb} {
		if f.Status != "completed" || f.Targeted != n || f.Succeeded+f.Failed+f.Canceled+f.Capped != n || f.Failed != 0 {
			t.Fatalf("broadcast %d: %+v; want completed, %d targets each with one outcome", f.ID, f, n)
		}
	}
	if fa.Succeeded+fb.Succeeded != n || fa.Capped+fb.Capped != n {
		t.Fatalf("succeeded %d + %d, capped %d + %d: want each pair to add up to the %d users", fa.Succeeded, fb.Succeeded, fa.Capped, fb.Capped, n)
	}
	var dups int64
	for uid := 1; uid <= n; uid++ {
		c := e.emu.Counts(demo.SeedTokenName(uint64(uid), 1, false))
		if c.Accepted == 0 {
			t.Fatalf("user %d got neither broadcast: capped in one and unsent in the other", uid)
		}
		dups += c.Accepted - 1
	}
	// The ledger agrees: every user holds one day's slot, none two.
	var slots, holders int
	if err := e.pool.QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM frequency_slots").Scan(&slots, &holders); err != nil {
		t.Fatal(err)
	}
	if slots != n || holders != n {
		t.Fatalf("the ledger holds %d slots of %d users, want one slot for each of the %d", slots, holders, n)
	}
	limit := e.bound(e.cfg.Engine.RateLimit)
	if dups > limit {
		t.Fatalf("%d repeated sends, above the documented bound %d", dups, limit)
	}
	takeovers := 0
	for _, f := range []broadcastView{fa, fb} {
		if f.Chunks != nil {
			takeovers += f.Chunks.Takeovers
		}
	}
	if takeovers == 0 {
		t.Fatal("no chunk was taken over: the kill came after the work was done?")
	}
	t.Logf("kill -9 at half of %d users under 1/day: A succeeded %d capped %d, B succeeded %d capped %d; %d repeated sends (bound %d), %d chunks taken over",
		n, fa.Succeeded, fa.Capped, fb.Succeeded, fb.Capped, dups, limit, takeovers)
}
