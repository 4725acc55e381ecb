//go:build !race

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
)

// After a kill -9 mid-broadcast and a takeover by the restarted
// instance, the kept outcomes are the emulator's record: the export has a
// line per target, each token's outcome accepted exactly when the
// emulator accepted it, as many accepted lines as succeeded; and a user's
// look-up says so.
func TestKill9KeepsOutcomesEqualToWhatWasSent(t *testing.T) {
	const pod = "pod-0"
	e := newProcEnv(t, 20000, fcmemu.Config{})
	a := e.startAs("crashing", pod)
	b := e.submit(a)
	e.waitAccepted(0.4)
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.WaitExit(t, "kill -9")
	r := e.startAs("restarted", pod)
	final := e.waitFinished(r, b.ID)
	dups := e.verify(final)
	if final.Chunks == nil || final.Chunks.Takeovers == 0 {
		t.Fatalf("no chunk was taken over: %+v", final.Chunks)
	}

	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/push/broadcasts/%d/outcomes", r.URL, b.ID), nil)
	req.Header.Set("Authorization", "Bearer "+procToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %v %v", resp, err)
	}
	defer resp.Body.Close()
	seen := map[uint64]string{}
	var accepted int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l struct {
			UserID  uint64 `json:"user_id"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if _, twice := seen[l.UserID]; twice {
			t.Fatalf("user %d listed twice", l.UserID)
		}
		seen[l.UserID] = l.Outcome
		if l.Outcome == "accepted" {
			accepted++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != e.n || accepted != final.Succeeded {
		t.Fatalf("export: %d lines, %d accepted; want %d lines and %d accepted", len(seen), accepted, e.n, final.Succeeded)
	}
	for uid := 1; uid <= e.n; uid++ {
		got := e.emu.Counts(demo.SeedTokenName(uint64(uid), 1, false)).Accepted > 0
		if (seen[uint64(uid)] == "accepted") != got {
			t.Fatalf("user %d: kept %q, the emulator accepted it: %v", uid, seen[uint64(uid)], got)
		}
	}
	var page struct {
		Deliveries []struct {
			Devices []struct {
				Outcome string `json:"outcome"`
			} `json:"devices"`
		} `json:"deliveries"`
	}
	req, _ = http.NewRequest("GET", r.URL+"/push/users/7/deliveries", nil)
	req.Header.Set("Authorization", "Bearer "+procToken)
	lr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Body.Close()
	if err := json.NewDecoder(lr.Body).Decode(&page); err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].Devices[0].Outcome != seen[7] {
		t.Fatalf("user 7's look-up: %+v %v, want %q", page, err, seen[7])
	}
	t.Logf("kill -9 at 40%%: %d chunks taken over, %d duplicates; the export's %d lines match the emulator", final.Chunks.Takeovers, dups, len(seen))
}
