package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/internal/testsupport/teststack"
)

// spreadView is the broadcast object's scheduling fields.
type spreadView struct {
	teststack.Broadcast
	Trigger  string     `json:"trigger"`
	SendAt   *time.Time `json:"send_at"`
	FireTime *time.Time `json:"fire_time"`
	StartsAt *time.Time `json:"starts_at"`
}

func withSpread(d time.Duration, more func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.Engine.StartSpread = d
		if more != nil {
			more(c)
		}
	}
}

// postKeyed POSTs body to /push/broadcast with an Idempotency-Key and
// decodes the answer.
func postKeyed(t *testing.T, s *teststack.Stack, key string, body any) (*http.Response, spreadView) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.API.URL+"/push/broadcast", jsonBody(t, body))
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v spreadView
	decode(t, readAll(t, resp), &v)
	return resp, v
}

// A scheduled broadcast with a spread starts at send_at plus its offset,
// not before (nothing is sent between the two), on exactly one of two
// instances, and a repeated submit does not re-roll the offset.
func TestScheduledStartSpreadFiresOnceOnTwoInstances(t *testing.T) {
	const spread = 3 * time.Second
	s := teststack.New(t, teststack.Options{Configure: withSpread(spread, nil)})
	second := s.AddInstance()
	toks := tokens("ok-", 200)
	s.SeedTokens(1, toks)
	// A key whose offset is well clear of send_at, so "started at send_at"
	// and "started at starts_at" are told apart.
	var key string
	for i := 0; key == ""; i++ {
		if off := broadcast.StartOffset(fmt.Sprintf("spread-%d", i), spread); off >= 1500*time.Millisecond && off < 2800*time.Millisecond {
			key = fmt.Sprintf("spread-%d", i)
		}
	}
	sendAt := time.Now().Add(time.Second).Truncate(time.Millisecond).UTC()
	body := map[string]any{"title": "spread", "send_at": sendAt.Format(time.RFC3339Nano), "audience": map[string]any{"all": true}}
	resp, b := postKeyed(t, s, key, body)
	want := sendAt.Add(broadcast.StartOffset(key, spread))
	if resp.StatusCode != http.StatusAccepted || b.Status != "scheduled" || b.SendAt == nil || !b.SendAt.Equal(sendAt) ||
		b.StartsAt == nil || !b.StartsAt.Equal(want) {
		t.Fatalf("submit: %d %+v (starts_at %v), want send_at %v and starts_at %v", resp.StatusCode, b, b.StartsAt, sendAt, want)
	}
	// The retry of the submit, and the other instance, see the same start.
	resp, again := postKeyed(t, s, key, body)
	if resp.Header.Get("Idempotent-Replayed") != "true" || again.ID != b.ID || again.StartsAt == nil || !again.StartsAt.Equal(want) {
		t.Fatalf("repeated submit: %s %+v starts_at %v, want broadcast %d starting %v", resp.Header.Get("Idempotent-Replayed"), again, again.StartsAt, b.ID, want)
	}
	var other spreadView
	s.DoURL(second.API.URL, "GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &other)
	if other.StartsAt == nil || !other.StartsAt.Equal(want) {
		t.Fatalf("second instance sees starts_at %v, want %v", other.StartsAt, want)
	}
	// Past send_at, before starts_at: still scheduled, nothing sent.
	time.Sleep(time.Until(sendAt.Add(500 * time.Millisecond)))
	var mid spreadView
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &mid)
	if time.Now().Before(want) && (mid.Status != "scheduled" || s.Emu.Stats().Requests != 0) {
		t.Fatalf("between send_at and starts_at: status %s, %d requests sent", mid.Status, s.Emu.Stats().Requests)
	}
	final := s.WaitFinished(b.ID, 30*time.Second)
	if final.Status != "completed" || final.Succeeded != int64(len(toks)) || final.StartedAt == nil || final.StartedAt.Before(want) {
		t.Fatalf("final %+v, want completed with %d succeeded, started at or after %v", final, len(toks), want)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Accepted != 1 {
			t.Fatalf("%s accepted %d times with two instances", tk, c.Accepted)
		}
	}
}

// Many scheduled broadcasts: every start is send_at plus an offset in
// [0, spread), the offset their key gives, and they are not all the same.
func TestScheduledStartsStayWithinTheSpread(t *testing.T) {
	t.Parallel()
	const spread = 2 * time.Second
	s := teststack.New(t, teststack.Options{Configure: withSpread(spread, nil)})
	sendAt := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	body := map[string]any{"title": "later", "send_at": sendAt.Format(time.RFC3339), "audience": map[string]any{"all": true}}
	offsets := map[time.Duration]int{}
	for i := range 20 {
		key := ""
		if i%2 == 0 { // half of them keyless: their offset comes from the submit token
			key = fmt.Sprintf("later-%d", i)
		}
		resp, b := postKeyed(t, s, key, body)
		if resp.StatusCode != http.StatusAccepted || b.Status != "scheduled" || b.StartsAt == nil {
			t.Fatalf("submit %d: %d %+v", i, resp.StatusCode, b)
		}
		off := b.StartsAt.Sub(sendAt)
		if off < 0 || off >= spread {
			t.Fatalf("broadcast %d starts %v after send_at, outside [0, %v)", b.ID, off, spread)
		}
		if key != "" && off != broadcast.StartOffset(key, spread) {
			t.Fatalf("broadcast %d: offset %v, its key gives %v", b.ID, off, broadcast.StartOffset(key, spread))
		}
		offsets[off]++
	}
	if len(offsets) < 2 {
		t.Fatalf("20 broadcasts all start at the same offset: %v", offsets)
	}
	if s.Emu.Stats().Requests != 0 {
		t.Fatal("a broadcast scheduled an hour ahead sent something")
	}
}

// The scheduler's fires of an every-second job on two instances: each fire
// is one broadcast starting at its fire time plus the offset of its key
// (in [0, spread)), and each sends exactly once to every token.
func TestCronStartsStayWithinTheSpread(t *testing.T) {
	t.Parallel()
	coveredBy(t, "broadcast (TestStartOffsetStaysWithinTheSpreadAndIsDeterministic)")
	const spread = 2 * time.Second
	s := teststack.New(t, teststack.Options{Configure: withSpread(spread, func(c *config.Config) {
		c.Jobs = []cron.Job{everySecondJob("tick")}
	})})
	second := s.AddInstance()
	toks := tokens("ok-", 5)
	s.SeedTokens(1, toks)
	var n int
	waitUntil(t, "four fires of an every-second job", 20*time.Second, func() bool {
		if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM broadcasts WHERE job_name = 'tick'"); err != nil {
			t.Fatal(err)
		}
		return n >= 4
	})
	stopScheduler(t, s.First)
	stopScheduler(t, second)
	var rows []struct {
		ID       uint64    `db:"id"`
		FireTime time.Time `db:"fire_time"`
	}
	if err := s.SQL.Select(&rows, "SELECT id, fire_time FROM broadcasts WHERE job_name = 'tick' ORDER BY fire_time"); err != nil {
		t.Fatal(err)
	}
	offsets := map[time.Duration]bool{}
	seen := map[time.Time]bool{}
	for _, r := range rows {
		if seen[r.FireTime] {
			t.Fatalf("fire %v made two broadcasts with two instances", r.FireTime)
		}
		seen[r.FireTime] = true
		final := s.WaitFinished(r.ID, 30*time.Second)
		var b spreadView
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", r.ID), nil, &b)
		fire := r.FireTime.UTC()
		want := fire.Add(broadcast.StartOffset("cron:tick:"+fire.Format(time.RFC3339Nano), spread))
		if b.Trigger != "cron" || b.FireTime == nil || !b.FireTime.Equal(fire) || b.StartsAt == nil || !b.StartsAt.Equal(want) {
			t.Fatalf("fire %v: %+v fire_time %v starts_at %v, want starts_at %v", fire, b, b.FireTime, b.StartsAt, want)
		}
		off := b.StartsAt.Sub(fire)
		if off < 0 || off >= spread {
			t.Fatalf("fire %v starts %v after its fire time, outside [0, %v)", fire, off, spread)
		}
		offsets[off] = true
		if final.Status != "completed" || final.Succeeded != int64(len(toks)) || final.StartedAt == nil || final.StartedAt.Before(want) {
			t.Fatalf("fire %v: final %+v, want completed, started at or after %v", fire, final, want)
		}
	}
	if len(offsets) < 2 {
		t.Fatalf("%d fires all start at the same offset: %v", len(rows), offsets)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Accepted != int64(len(rows)) {
			t.Fatalf("%s accepted %d times for %d fires", tk, c.Accepted, len(rows))
		}
	}
}

// Fires through the internal trigger get the same start on every instance
// and on a repeat: it is a function of the job and fire time.
func TestCronTriggerStartIsTheSameOnEveryInstance(t *testing.T) {
	t.Parallel()
	const spread = 4 * time.Second
	s := teststack.New(t, teststack.Options{Configure: withSpread(spread, func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{{Name: "digest", Schedule: "0 9 * * MON", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "digest"}}}
	})})
	second := s.AddInstance()
	base := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour) // ahead: nothing is sent
	offsets := map[time.Duration]bool{}
	for i := range 12 {
		fire := base.Add(time.Duration(i) * time.Hour)
		body := fmt.Sprintf(`{"fire_time":%q}`, fire.Format(time.RFC3339))
		var a, b spreadView
		s.DoAuth("POST", "/internal/cron/digest", internalToken, body, &a)
		req, _ := http.NewRequest("POST", second.API.URL+"/internal/cron/digest", jsonBody(t, map[string]string{"fire_time": fire.Format(time.RFC3339)}))
		req.Header.Set("Authorization", "Bearer "+internalToken)
		req.Header.Set("Content-Type", "application/json")
		r2, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		decode(t, readAll(t, r2), &b)
		r2.Body.Close()
		want := fire.Add(broadcast.StartOffset("cron:digest:"+fire.Format(time.RFC3339Nano), spread))
		if a.Status != "scheduled" || a.StartsAt == nil || !a.StartsAt.Equal(want) {
			t.Fatalf("fire %v: %+v starts_at %v, want scheduled starting %v", fire, a, a.StartsAt, want)
		}
		if r2.Header.Get("Idempotent-Replayed") != "true" || b.ID != a.ID || b.StartsAt == nil || !b.StartsAt.Equal(want) {
			t.Fatalf("fire %v on the second instance: %+v starts_at %v, want broadcast %d starting %v", fire, b, b.StartsAt, a.ID, want)
		}
		offsets[want.Sub(fire)] = true
		if off := want.Sub(fire); off < 0 || off >= spread {
			t.Fatalf("fire %v: offset %v outside [0, %v)", fire, off, spread)
		}
	}
	if len(offsets) < 2 {
		t.Fatalf("12 fires all start at the same offset: %v", offsets)
	}
}

// Spread 0 keeps the old behaviour: a scheduled broadcast starts at
// send_at, a cron fire is queued at once and has no starts_at.
func TestNoStartSpread(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: withSpread(0, func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{{Name: "digest", Schedule: "0 9 * * MON", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "digest"}}}
	})})
	toks := tokens("ok-", 3)
	s.SeedTokens(1, toks)
	sendAt := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	resp, b := postKeyed(t, s, "", map[string]any{"title": "later", "send_at": sendAt.Format(time.RFC3339Nano), "audience": map[string]any{"all": true}})
	if resp.StatusCode != http.StatusAccepted || b.StartsAt == nil || !b.StartsAt.Equal(sendAt) {
		t.Fatalf("scheduled without a spread: %d %+v starts_at %v, want %v", resp.StatusCode, b, b.StartsAt, sendAt)
	}
	var f spreadView
	if resp := s.DoAuth("POST", "/internal/cron/digest", internalToken, nil, &f); resp.StatusCode != 200 || f.Status == "scheduled" || f.StartsAt != nil {
		t.Fatalf("cron fire without a spread: %d %+v starts_at %v, want queued at once", resp.StatusCode, f, f.StartsAt)
	}
	final := s.WaitFinished(f.ID, 30*time.Second)
	if final.Status != "completed" || final.Succeeded != int64(len(toks)) {
		t.Fatalf("cron fire final %+v", final)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Accepted != 1 {
			t.Fatalf("%s accepted %d times", tk, c.Accepted)
		}
	}
}

// A held broadcast released after its send_at but before its starts_at
// waits, scheduled, for starts_at: the release goes by the spread start.
func TestHeldReleaseWaitsForTheSpreadStart(t *testing.T) {
	const spread = 5 * time.Second
	s := teststack.New(t, teststack.Options{Configure: withSpread(spread, nil)})
	toks := tokens("ok-", 10)
	s.SeedTokens(1, toks)
	var key string
	for i := 0; key == ""; i++ {
		if off := broadcast.StartOffset(fmt.Sprintf("held-%d", i), spread); off >= 3*time.Second && off < 4500*time.Millisecond {
			key = fmt.Sprintf("held-%d", i)
		}
	}
	sendAt := time.Now().Add(time.Second).Truncate(time.Millisecond).UTC()
	resp, b := postKeyed(t, s, key, map[string]any{"title": "held", "hold": true, "send_at": sendAt.Format(time.RFC3339Nano), "audience": map[string]any{"all": true}})
	want := sendAt.Add(broadcast.StartOffset(key, spread))
	if resp.StatusCode != http.StatusAccepted || b.Status != "held" || b.StartsAt == nil || !b.StartsAt.Equal(want) {
		t.Fatalf("hold: %d %+v starts_at %v, want held starting %v", resp.StatusCode, b, b.StartsAt, want)
	}
	time.Sleep(time.Until(sendAt.Add(200 * time.Millisecond)))
	var r spreadView
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), nil, &r); resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %d %+v", resp.StatusCode, r)
	}
	if time.Now().Before(want.Add(-500*time.Millisecond)) && r.Status != "scheduled" {
		t.Fatalf("released past send_at, before starts_at %v: status %s, want scheduled", want, r.Status)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if done.Status != "completed" || done.Succeeded != int64(len(toks)) || done.StartedAt == nil || done.StartedAt.Before(want) {
		t.Fatalf("final %+v, want completed, started at or after %v", done, want)
	}
	if st := s.Emu.Stats(); st.Accepted != int64(len(toks)) {
		t.Fatalf("emulator accepted %d, want %d", st.Accepted, len(toks))
	}
}
