//go:build !race

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"pushfan/engagement"
	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
)

// An instance killed (-9) while apps post events: every event it answered
// 200 for is counted after the restart, and posting them all again to the
// new instance counts each target exactly once.
func TestKill9WhileEventsStreamIn(t *testing.T) {
	const n = 3000
	e := newProcEnv(t, n, fcmemu.Config{Latency: time.Millisecond})
	e.emu.RecordMessages()
	a := e.start("events-a")
	b := e.waitFinished(a, e.submit(a).ID)

	// Every delivered device's event token, as the emulator received it.
	var toks []string
	for uid := 1; uid <= n; uid++ {
		got, ok, err := e.emu.LastNotification(demo.SeedTokenName(uint64(uid), 1, false))
		if err != nil {
			t.Fatal(err)
		}
		if ok && e.emu.Counts(demo.SeedTokenName(uint64(uid), 1, false)).Accepted > 0 {
			toks = append(toks, got.Data["pushfan"])
		}
	}
	if int64(len(toks)) != b.Succeeded {
		t.Fatalf("%d event tokens received for %d succeeded", len(toks), b.Succeeded)
	}

	// Eight apps post opens in batches of 25; a is killed a third of the
	// way in. What a 200 answered is remembered.
	var mu sync.Mutex
	answered := map[string]bool{}
	posted := make(chan struct{}, len(toks))
	var wg sync.WaitGroup
	work := make(chan []string)
	for range 8 {
		wg.Go(func() {
			for batch := range work {
				if postOpens(a.URL, batch) {
					mu.Lock()
					for _, tok := range batch {
						answered[tok] = true
					}
					mu.Unlock()
				}
				posted <- struct{}{}
			}
		})
	}
	killed := false
	for i := 0; i < len(toks); i += 25 {
		if !killed && i >= len(toks)/3 {
			// Wait until a third is answered, so the kill lands mid-stream.
			deadline := time.Now().Add(time.Minute)
			for {
				mu.Lock()
				got := len(answered)
				mu.Unlock()
				if got >= len(toks)/4 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("only %d events answered within a minute, waiting for %d", got, len(toks)/4)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		work <- toks[i:min(i+25, len(toks))]
	}
	close(work)
	wg.Wait()
	a.WaitExit(t, "killed")

	keys := e.eventKeys()
	stored := e.openedTargets(b.ID)
	var lost int
	for tok := range answered {
		c, err := keys.Verify(tok, time.Now())
		if err != nil {
			t.Fatalf("a token pushfan sent does not verify: %v", err)
		}
		if !stored[c.Target] {
			lost++
		}
	}
	if lost > 0 || len(answered) == 0 || len(answered) == len(toks) {
		t.Fatalf("%d of %d events answered 200 are not stored (%d sent in all; the kill must land mid-stream)", lost, len(answered), len(toks))
	}
	t.Logf("answered before the kill: %d of %d; stored: %d", len(answered), len(toks), len(stored))

	// Everything again, to a new instance: each target once.
	c := e.start("events-b")
	var accepted, dups int
	for i := 0; i < len(toks); i += 100 {
		ans := mustPostOpens(t, c.URL, toks[i:min(i+100, len(toks))])
		accepted, dups = accepted+ans.Accepted, dups+ans.Duplicates
	}
	if got := e.openedTargets(b.ID); len(got) != len(toks) || accepted+len(stored) != len(toks) || dups != len(stored) {
		t.Fatalf("after the replay: %d targets opened (want %d); accepted %d and duplicates %d, with %d stored before", len(got), len(toks), accepted, dups, len(stored))
	}
}

// postOpens posts tokens as opened; true when answered 200.
func postOpens(base string, toks []string) bool {
	resp, err := http.Post(base+"/v1/events", "application/json", bytes.NewReader(opensBody(toks)))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

type eventsAnswer struct {
	Accepted, Duplicates int
	Refused              []struct {
		Index int
		Code  string
	}
}

func mustPostOpens(t *testing.T, base string, toks []string) eventsAnswer {
	t.Helper()
	resp, err := http.Post(base+"/v1/events", "application/json", bytes.NewReader(opensBody(toks)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a eventsAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || len(a.Refused) > 0 {
		t.Fatalf("POST /v1/events: %d %+v %v", resp.StatusCode, a, err)
	}
	return a
}

func opensBody(toks []string) []byte {
	type ev struct {
		Token string `json:"token"`
		Type  string `json:"type"`
	}
	evs := make([]ev, len(toks))
	for i, tok := range toks {
		evs[i] = ev{tok, "opened"}
	}
	raw, _ := json.Marshal(map[string]any{"events": evs})
	return raw
}

// eventKeys are the keys the instances generated and share.
func (e *procEnv) eventKeys() *engagement.Keys {
	e.t.Helper()
	var kid string
	var secret []byte
	if err := e.pool.QueryRow("SELECT kid, secret FROM event_keys").Scan(&kid, &secret); err != nil {
		e.t.Fatal(err)
	}
	k, err := engagement.NewKeys([]engagement.Key{{ID: kid, Secret: secret}})
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// openedTargets are broadcast id's targets stored as opened.
func (e *procEnv) openedTargets(id uint64) map[uint64]bool {
	e.t.Helper()
	var ids []uint64
	if err := e.pool.Select(&ids, "SELECT target_id FROM engagement_events WHERE broadcast_id = ? AND type = 2", id); err != nil {
		e.t.Fatal(fmt.Errorf("reading opens: %w", err))
	}
	out := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
