//go:build !race

package main

import (
	"syscall"
	"testing"

	"pushfan/broadcast/message"
	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
)

// A/B variants across a kill -9: the instance that takes the chunks over
// sends every user the variant the first one did (the pick is a hash of
// broadcast and user, not a choice an instance remembers), so no user's
// variant switches, even for the sends repeated after the kill.
func TestKill9SwitchesNoUsersVariant(t *testing.T) {
	const n = 20000
	e := newProcEnv(t, n, fcmemu.Config{})
	e.emu.RecordMessages()
	a := e.start("ab-a")
	b := e.call(a.URL, "POST", "/push/broadcast?wait=0", `{"audience":{"all":true},"variants":[`+
		`{"name":"a","weight":50,"title":"Variant A"},{"name":"b","weight":50,"title":"Variant B"}]}`)
	e.waitAccepted(0.5)
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.WaitExit(t, "killed")
	c := e.start("ab-b")
	final := e.waitFinished(c, b.ID)
	dups := e.verify(final)
	titles := map[string]string{"Variant A": "a", "Variant B": "b"}
	per := map[string]int64{}
	for uid := 1; uid <= n; uid++ {
		tok := demo.SeedTokenName(uint64(uid), 1, false)
		got, ok, err := e.emu.LastNotification(tok)
		if err != nil || !ok {
			t.Fatalf("user %d: recorded %v %v", uid, ok, err)
		}
		want := []string{"a", "b"}[message.PickVariant(b.ID, uint64(uid), []int{50, 50})]
		if titles[got.Title] != want {
			t.Fatalf("user %d got %q, the variant the hash picks is %s", uid, got.Title, want)
		}
		per[want]++
	}
	if per["a"]+per["b"] != n || final.Variants["a"]+final.Variants["b"] != n {
		t.Fatalf("sends per variant %v, users per variant %v, want %d in all", final.Variants, per, n)
	}
	t.Logf("kill -9 at half: %d duplicates; users per variant %v; sends per variant %v", dups, per, final.Variants)
}
