package caps_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/caps"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// End to end, issue 38's resend defect: a resend runs while its original
// ended two hours ago, and retention's sweep passes. User 1 has two
// devices, each in a chunk of its own; both failed (INTERNAL) in the
// original, which so released the user. The resend holds both sends in
// flight at the emulator while the sweep runs; then the first fails
// again, and its checkpoint must keep the day's slot for the other, still
// in flight: a broadcast racing to user 1 is capped, and the user gets
// exactly one message, the resend's, as the emulator counts. With the
// resend's holds keyed by the original, the sweep deleted them, the
// checkpoint gave the slot back, and user 1 got both.
func TestAResendWhoseOriginalEndedHoursAgoKeepsTheDayThroughTheSweep(t *testing.T) {
	dead, held := newDisarmedSendGate("internal-"), newDisarmedSendGate("flaky1xinternal-")
	s := teststack.New(t, teststack.Options{
		Configure: func(c *config.Config) {
			c.Engine.FrequencyCap = "1/day"
			c.Engine.ChunkWidth = 1                // each device its own chunk
			c.Engine.MaxAttempts = 1               // a failure is final in each broadcast
			c.Engine.SendTimeout = 2 * time.Minute // the held sends are not retried meanwhile
		},
		EmulatorWrap: func(next http.Handler) http.Handler { return dead.wrap(held.wrap(next)) },
	})
	t.Cleanup(func() { dead.release(); held.release() }) // before the stack stops
	s.Emu.RecordMessages()
	s.MustExec("INSERT INTO users (id) VALUES (1)")
	s.MustExec("INSERT INTO device_tokens (id, user_id, token) VALUES (1, 1, 'internal-1'), (2, 1, 'flaky1xinternal-1')")

	orig := submit(s, map[string]any{"title": "Sale", "body": "today", "audience": map[string]any{"all": true}})
	if f := s.WaitFinished(orig.ID, time.Minute); f.Failed != 2 || f.Succeeded != 0 {
		t.Fatalf("original: succeeded %d, failed %d; want both devices failed", f.Succeeded, f.Failed)
	}
	s.MustExec("UPDATE broadcasts SET finished_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR WHERE id = ?", orig.ID)

	dead.arm()
	held.arm()
	var r teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend?wait=0", orig.ID), map[string]any{"codes": []string{"INTERNAL"}}, &r); resp.StatusCode/100 != 2 || r.ID == 0 {
		t.Fatalf("resend of broadcast %d: HTTP %d", orig.ID, resp.StatusCode)
	}
	for _, g := range []*sendGate{dead, held} {
		select {
		case <-g.arrived:
		case <-time.After(time.Minute):
			t.Fatalf("waited a minute for the resend's send to %s… to reach the emulator", g.prefix)
		}
	}
	now := time.Now()
	if _, err := caps.NewLedger(s.SQL.DB, nil).Sweep(t.Context(), now.Add(-time.Hour), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s.SQL.DB, "SELECT COUNT(*) FROM frequency_holds WHERE broadcast_id = ? AND targets > 0", r.ID); n != 2 {
		t.Errorf("after the sweep the resend's chunks hold user 1 in %d rows, want 2", n)
	}

	dead.release()
	teststack.WaitEvery(t, "the resend's checkpoint storing internal-1's failure", time.Minute, 20*time.Millisecond, func() bool {
		var b teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", r.ID), nil, &b)
		return b.Failed == 1
	})
	racing := submit(s, map[string]any{"title": "Racing", "body": "x", "audience": map[string]any{"user_ids": []uint64{1}}, "class": "bulk"})
	fb := s.WaitFinished(racing.ID, time.Minute)
	held.release()
	fr := s.WaitFinished(r.ID, time.Minute)
	checkSums(t, fr)
	checkSums(t, fb)
	if fr.Succeeded != 1 || fr.Failed != 1 || fr.Capped != 0 {
		t.Errorf("resend: succeeded %d, failed %d, capped %d; want flaky1xinternal-1 sent, internal-1 failed", fr.Succeeded, fr.Failed, fr.Capped)
	}
	if fb.Capped != 2 || fb.Succeeded != 0 {
		t.Errorf("racing broadcast: succeeded %d, capped %d; want both of user 1's devices capped", fb.Succeeded, fb.Capped)
	}
	flaky, internal := s.Emu.Counts("flaky1xinternal-1"), s.Emu.Counts("internal-1")
	if flaky.Accepted != fr.Succeeded || internal.Accepted != 0 {
		t.Fatalf("the emulator accepted %d messages for flaky1xinternal-1 and %d for internal-1; want the resend's %d, exactly one for user 1 under 1/day",
			flaky.Accepted, internal.Accepted, fr.Succeeded)
	}
	if rec, ok, err := s.Emu.LastNotification("flaky1xinternal-1"); err != nil || !ok || rec.Title != "Sale" {
		t.Errorf("flaky1xinternal-1 got %+v (recorded %v, %v); want the resend of Sale", rec, ok, err)
	}
	if n := count(t, s.SQL.DB, "SELECT COUNT(*) FROM frequency_slots WHERE user_id = 1 AND broadcast_id = ?", orig.ID); n != 1 {
		t.Errorf("user 1 holds %d slots of the original, want 1 (taken by its resend)", n)
	}
	if v, ok := metric(t, s, `pushfan_frequency_cap_exceeded_total{app="default"}`); !ok || v != 0 {
		t.Errorf("pushfan_frequency_cap_exceeded_total %v (exposed: %v), want 0", v, ok)
	}
}

// Two resends of one original at once, under 1/day, end to end: the
// original reached users 1-20 (on another device) and failed on 21-80,
// and a broadcast took the day of 41-60 since. Both resends, paced to
// run side by side, reach users 1-40 on the failed device and cap 41-60.
// Users 61-80's device fails twice more: the resend whose send comes
// first fails there (and gives back the slot, or hands it to the other),
// the other one reaches them. Every count is what the emulator received,
// and each user holds one slot: the original's for users 1-40 and
// 61-80, whichever resend reached them.
func TestTwoResendsOfOneOriginalAtOnceCountWhatTheEmulatorGot(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.FrequencyCap = "1/day"
		c.Engine.MaxAttempts = 1
	}})
	s.MustExec("INSERT INTO users (id) SELECT seq FROM seq_1_to_80")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('ok-', seq) FROM seq_1_to_20")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('flaky1xinternal-', seq) FROM seq_1_to_60")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('flaky2xinternal-', seq) FROM seq_61_to_80")

	orig := submit(s, map[string]any{"title": "Sale", "body": "today", "audience": map[string]any{"all": true}, "max_rate": 20})
	if f := s.WaitFinished(orig.ID, time.Minute); f.Succeeded != 20 || f.Failed != 80 {
		t.Fatalf("original: succeeded %d, failed %d; want users 1-20's ok device sent, the 80 flaky ones failed", f.Succeeded, f.Failed)
	}
	var ids []uint64
	for u := uint64(41); u <= 60; u++ {
		ids = append(ids, u)
	}
	other := submit(s, map[string]any{"title": "Other", "body": "x", "audience": map[string]any{"user_ids": ids}, "class": "bulk"})
	if f := s.WaitFinished(other.ID, time.Minute); f.Succeeded != 20 {
		t.Fatalf("the other broadcast: succeeded %d, capped %d; want users 41-60 reached", f.Succeeded, f.Capped)
	}

	var resends [2]teststack.Broadcast
	for i := range resends {
		if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend?wait=0", orig.ID), map[string]any{"codes": []string{"INTERNAL"}}, &resends[i]); resp.StatusCode/100 != 2 || resends[i].ID == 0 {
			t.Fatalf("resend %d of broadcast %d: HTTP %d", i+1, orig.ID, resp.StatusCode)
		}
	}
	var succeeded, failed int64
	for i, r := range resends {
		f := s.WaitFinished(r.ID, 2*time.Minute)
		checkSums(t, f)
		if f.Succeeded < 40 || f.Capped != 20 || f.Succeeded+f.Failed != 60 {
			t.Errorf("resend %d: succeeded %d, capped %d, failed %d; want users 1-40 reached, 41-60 capped, 61-80 reached or failed", i+1, f.Succeeded, f.Capped, f.Failed)
		}
		succeeded += f.Succeeded
		failed += f.Failed
	}
	if succeeded != 2*40+20 || failed != 20 {
		t.Errorf("the resends reached %d and failed %d; want 100 (users 1-40 twice, 61-80 once) and 20", succeeded, failed)
	}
	// Side by side (the pace makes each take about 3 s): logged, as the
	// machine decides it; the counts hold either way.
	var overlap float64
	if err := s.SQL.QueryRow(`SELECT TIMESTAMPDIFF(MICROSECOND, MAX(started_at), MIN(finished_at)) / 1e6 FROM broadcasts WHERE id IN (?, ?)`,
		resends[0].ID, resends[1].ID).Scan(&overlap); err != nil {
		t.Fatal(err)
	}
	t.Logf("the resends ran side by side for %.1f s", overlap)
	var accepted int64
	for u := 1; u <= 80; u++ {
		token, want := fmt.Sprintf("flaky1xinternal-%d", u), int64(2) // both resends
		switch {
		case u > 60:
			token, want = fmt.Sprintf("flaky2xinternal-%d", u), 1 // the second resend to send
		case u > 40:
			want = 1 // the other broadcast
		}
		got := s.Emu.Counts(token).Accepted
		if got != want {
			t.Errorf("%s: the emulator accepted %d messages, want %d", token, got, want)
		}
		if u <= 40 || u > 60 {
			accepted += got
		}
	}
	if accepted != succeeded {
		t.Errorf("the emulator accepted %d messages of the resends, they count %d", accepted, succeeded)
	}
	if n := count(t, s.SQL.DB, "SELECT COUNT(DISTINCT user_id) FROM frequency_slots WHERE (user_id <= 40 OR user_id > 60) AND broadcast_id = ?", orig.ID); n != 60 {
		t.Errorf("%d of users 1-40 and 61-80 hold a slot of the original, want all 60", n)
	}
	if n := count(t, s.SQL.DB, "SELECT COUNT(*) FROM frequency_slots"); n != 80 {
		t.Errorf("the ledger holds %d slots, want 80: one per user", n)
	}
	if v, ok := metric(t, s, `pushfan_frequency_cap_exceeded_total{app="default"}`); !ok || v != 0 {
		t.Errorf("pushfan_frequency_cap_exceeded_total %v (exposed: %v), want 0", v, ok)
	}
}
