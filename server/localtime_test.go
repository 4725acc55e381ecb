package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// seedZoned seeds one user (and token prefix+i) per zone entry, user ids
// from first; an empty zone leaves users.timezone NULL.
func seedZoned(t *testing.T, s *teststack.Stack, first int, prefix string, zones []string) []string {
	t.Helper()
	toks := tokens(prefix, len(zones))
	s.SeedTokens(first, toks)
	for i, z := range zones {
		if z != "" {
			s.MustExec("UPDATE users SET timezone = ? WHERE id = ?", z, first+i)
		}
	}
	return toks
}

// accepted reports whether every token got exactly want messages.
func accepted(s *teststack.Stack, toks []string, want int64) bool {
	for _, tk := range toks {
		if s.Emu.Counts(tk).Accepted != want {
			return false
		}
	}
	return true
}

func assertNone(t *testing.T, s *teststack.Stack, what string, toks []string) {
	t.Helper()
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Attempts != 0 {
			t.Fatalf("%s: token %s got %+v, want nothing yet", what, tk, c)
		}
	}
}

func getBroadcast(s *teststack.Stack, id uint64) teststack.Broadcast {
	var b teststack.Broadcast
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
	return b
}

func waiting(b teststack.Broadcast) int64 {
	if b.Waiting == nil {
		return -1
	}
	return *b.Waiting
}

// Three zones: UTC+1, where send_at_local has passed, gets it at once;
// UTC (with a user whose zone is unknown and one with none, both on the
// default UTC) seconds later; UTC-1, an hour away, not before the cancel.
func TestLocalTimeDeliversPerZone(t *testing.T) {
	coveredBy(t, "broadcast/plan (TestALocalTimePlanPutsEachZoneInChunksOfItsInstant)")
	s := teststack.New(t, teststack.Options{})
	east := seedZoned(t, s, 1, "lt-east-", []string{"Etc/GMT-1", "Etc/GMT-1"})
	utc := seedZoned(t, s, 3, "lt-utc-", []string{"UTC", "UTC", "UTC", "Mars/Olympus_Mons", ""})
	west := seedZoned(t, s, 8, "lt-west-", []string{"Etc/GMT+1", "Etc/GMT+1", "Etc/GMT+1", "Etc/GMT+1"})

	due := time.Now().UTC().Add(6 * time.Second).Truncate(time.Second)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{
		"title": "local", "body": "9 am", "audience": map[string]any{"all": true},
		"send_at_local": due.Format("2006-01-02T15:04:05"),
	}, &b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	b = s.WaitPlanned(b.ID, 10*time.Second)
	if b.SendAtLocal != due.Format("2006-01-02T15:04:05") || b.Targeted != 11 || waiting(b) != 9 ||
		b.ZoneFallbacks == nil || *b.ZoneFallbacks != 1 || b.Deferred == nil || *b.Deferred != 0 {
		t.Fatalf("submitted: %+v (want targeted 11, waiting 9, zone_fallbacks 1, deferred 0)", b)
	}

	waitUntil(t, "the UTC+1 zone (time passed) delivered", 10*time.Second, func() bool { return accepted(s, east, 1) })
	if time.Now().Before(due.Add(-time.Second)) {
		assertNone(t, s, "UTC before its time", utc)
		if w := waiting(getBroadcast(s, b.ID)); w != 9 {
			t.Fatalf("waiting %d before the UTC time, want 9", w)
		}
	}
	waitUntil(t, "the UTC zone (and the default-zone users) delivered at their time", 20*time.Second, func() bool { return accepted(s, utc, 1) })
	if time.Now().Before(due) {
		t.Fatalf("the UTC zone was delivered before %v", due)
	}
	// The counters follow at the chunk's checkpoint.
	waitUntil(t, "succeeded 7 and waiting 4 after the UTC zone", 10*time.Second, func() bool {
		got := getBroadcast(s, b.ID)
		return waiting(got) == 4 && got.Status == "running" && got.Succeeded == 7
	})
	assertNone(t, s, "UTC-1, an hour away", west)

	var c teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
	c = s.WaitFinished(b.ID, 10*time.Second)
	if c.Status != "canceled" || c.Succeeded != 7 || c.Canceled != 4 || c.Failed != 0 || waiting(c) != 0 {
		t.Fatalf("canceled: %+v (want succeeded 7, canceled 4, waiting 0)", c)
	}
	time.Sleep(200 * time.Millisecond) // several dispatcher polls: nothing may go out after the cancel
	assertNone(t, s, "UTC-1 after the cancel", west)
	if !accepted(s, east, 1) || !accepted(s, utc, 1) {
		t.Fatal("a delivered zone got a second message")
	}
}

// Quiet hours from an hour ago until seconds from now, in UTC: the UTC
// users (and those without a zone, on the default UTC) are inside and
// deferred to the window's end; UTC-6 users are outside and get it at once.
func TestQuietHoursDefersToWindowEnd(t *testing.T) {
	coveredBy(t, "broadcast/plan (TestDueAt, TestALocalTimePlanPutsEachZoneInChunksOfItsInstant)")
	s := teststack.New(t, teststack.Options{})
	inside := seedZoned(t, s, 1, "qh-in-", []string{"UTC", "", "UTC"})
	outside := seedZoned(t, s, 4, "qh-out-", []string{"Etc/GMT+6", "Etc/GMT+6"})

	now := time.Now().UTC()
	end := now.Add(6 * time.Second).Truncate(time.Second)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{
		"title": "quiet", "body": "b", "audience": map[string]any{"all": true},
		"quiet_hours": map[string]any{"start": now.Add(-time.Hour).Format("15:04:05"), "end": end.Format("15:04:05")},
	}, &b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	b = s.WaitPlanned(b.ID, 10*time.Second)
	if b.Deferred == nil || *b.Deferred != 3 || waiting(b) != 3 || b.Targeted != 5 || b.QuietHours == nil {
		t.Fatalf("submitted: %+v (want deferred 3, waiting 3, targeted 5)", b)
	}
	waitUntil(t, "the users outside the window delivered", 10*time.Second, func() bool { return accepted(s, outside, 1) })
	if time.Now().Before(end.Add(-time.Second)) {
		assertNone(t, s, "inside the quiet window", inside)
	}
	done := s.WaitFinished(b.ID, 20*time.Second)
	if time.Now().Before(end) {
		t.Fatalf("finished before the window's end %v", end)
	}
	if done.Status != "completed" || done.Succeeded != 5 || *done.Deferred != 3 || waiting(done) != 0 {
		t.Fatalf("finished: %+v (want completed, succeeded 5, deferred 3, waiting 0)", done)
	}
	if !accepted(s, inside, 1) || !accepted(s, outside, 1) {
		t.Fatal("want exactly one message per token")
	}
}

func TestLocalTimeValidation(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	far := time.Now().UTC().Add(60 * 24 * time.Hour).Format("2006-01-02T15:04:05")
	for _, tc := range []struct {
		name, code, field string
		extra             map[string]any
	}{
		{"offset", "invalid_value", "send_at_local", map[string]any{"send_at_local": "2026-12-02T09:00:00+09:00"}},
		{"garbage", "invalid_value", "send_at_local", map[string]any{"send_at_local": "tomorrow 9am"}},
		{"with send_at", "invalid_value", "send_at_local", map[string]any{"send_at_local": "2026-12-02T09:00:00", "send_at": time.Now().Add(time.Hour).Format(time.RFC3339)}},
		{"too far", "send_at_too_far", "send_at_local", map[string]any{"send_at_local": far}},
		{"bad start", "invalid_value", "quiet_hours.start", map[string]any{"quiet_hours": map[string]any{"start": "25:00", "end": "08:00"}}},
		{"bad end", "invalid_value", "quiet_hours.end", map[string]any{"quiet_hours": map[string]any{"start": "22:00", "end": "8am"}}},
		{"empty window", "invalid_value", "quiet_hours", map[string]any{"quiet_hours": map[string]any{"start": "22:00", "end": "22:00"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}
			for k, v := range tc.extra {
				body[k] = v
			}
			var e teststack.ErrorBody
			resp := s.Do("POST", "/push/broadcast", body, &e)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Code != tc.code || e.Error.Field != tc.field {
				t.Fatalf("%d %+v, want 400 %s on %s", resp.StatusCode, e, tc.code, tc.field)
			}
		})
	}
}

// On a mapped schema the zones come from the mapped timezone column
// (members.tz): UTC+1 has passed and gets it, UTC (no zone, and an
// unknown one falling back to the default) waits until the cancel.
func TestLocalTimeOnMappedSchema(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, nil)
	for i, tz := range []any{"Etc/GMT-1", "Etc/GMT-1", nil, nil, "Nowhere/City"} {
		id := i + 1
		s.MustExec("INSERT INTO "+db+".members (member_id, push_agree, tz) VALUES (?, 'Y', ?)", id, tz)
		s.MustExec("INSERT INTO "+db+".push_devices (member_id, fcm_token) VALUES (?, ?)", id, fmt.Sprintf("mlt-%d", id))
	}
	due := time.Now().UTC().Add(time.Hour - 5*time.Second)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{
		"title": "local", "body": "b", "audience": map[string]any{"user_ids": []int{1, 2, 3, 4, 5}},
		"send_at_local": due.Format("2006-01-02T15:04:05"),
	}, &b)
	if resp.StatusCode != http.StatusAccepted || b.Targeted != 5 || waiting(b) != 3 || b.ZoneFallbacks == nil || *b.ZoneFallbacks != 1 {
		t.Fatalf("submit: %d %+v (want targeted 5, waiting 3, zone_fallbacks 1)", resp.StatusCode, b)
	}
	waitUntil(t, "the UTC+1 members delivered and counted", 10*time.Second, func() bool {
		return accepted(s, []string{"mlt-1", "mlt-2"}, 1) && getBroadcast(s, b.ID).Succeeded == 2
	})
	assertNone(t, s, "UTC members an hour away", []string{"mlt-3", "mlt-4", "mlt-5"})
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
	c := s.WaitFinished(b.ID, 10*time.Second)
	if c.Status != "canceled" || c.Succeeded != 2 || c.Canceled != 3 || waiting(c) != 0 {
		t.Fatalf("canceled: %+v (want succeeded 2, canceled 3)", c)
	}
	assertNone(t, s, "UTC members after the cancel", []string{"mlt-3", "mlt-4", "mlt-5"})
}

// The deployment's quiet hours (PUSHFAN_QUIET_HOURS) apply to a scheduled
// broadcast when it is promoted: its UTC users are inside the window then
// and wait for its end; UTC-6 is outside.
func TestDefaultQuietHoursOnAScheduledBroadcast(t *testing.T) {
	coveredBy(t, "broadcast (TestDefaultQuietHoursByClass) and broadcast/plan (TestDueAt, TestALocalTimePlanPutsEachZoneInChunksOfItsInstant)")
	now := time.Now().UTC()
	// The window must still be open when the broadcast is promoted: 15 s
	// covers a stack start on a loaded machine (8 s did not, once).
	end := now.Add(15 * time.Second).Truncate(time.Second)
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.QuietHours = now.Add(-time.Hour).Format("15:04:05") + "-" + end.Format("15:04:05")
		c.Engine.StartSpread = 0
	}})
	inside := seedZoned(t, s, 1, "dq-in-", []string{"UTC", "UTC"})
	outside := seedZoned(t, s, 3, "dq-out-", []string{"Etc/GMT+6"})
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{
		"title": "later", "body": "b", "audience": map[string]any{"all": true},
		"send_at": time.Now().Add(2 * time.Second).Format(time.RFC3339Nano),
	}, &b)
	if resp.StatusCode != http.StatusAccepted || b.Status != "scheduled" || b.QuietHours == nil {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	waitUntil(t, "promoted with 2 deferred targets waiting", 10*time.Second, func() bool {
		b = getBroadcast(s, b.ID)
		return b.Status != "scheduled" && b.Deferred != nil && *b.Deferred == 2
	})
	waitUntil(t, "the user outside the window delivered", 10*time.Second, func() bool { return accepted(s, outside, 1) })
	if time.Now().Before(end.Add(-time.Second)) {
		assertNone(t, s, "inside the default quiet window", inside)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if done.Status != "completed" || done.Succeeded != 3 || *done.Deferred != 2 || !accepted(s, inside, 1) {
		t.Fatalf("finished: %+v (want completed, succeeded 3, deferred 2)", done)
	}
}
