package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// A paced "all" is counted as fast as any other: its pace decides when its
// sends go out, not when its audience is counted. 300,000 tokens at
// max_rate 50 have their exact targeted (every eligible token, which the
// plan's chunks hold) while a handful have been sent; the plan before this
// rested beside its own paced sends as if they were starved of CPU, and
// ran at a tenth of its speed.
func TestAPacedAllIsCountedWhileOnlyAFewAreSent(t *testing.T) {
	const users = 150000
	s := teststack.New(t, teststack.Options{CaptureLogs: true, Configure: func(c *config.Config) {
		c.Engine.RateLimit = 2000 // the plan is ahead of its sends after 10,000 targets
	}})
	n := int64(s.SeedZoned(users, 2, nil))
	s.MustExec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id % 10 = 3")
	s.MustExec("UPDATE users SET push_enabled = 0 WHERE id % 100 = 7")
	var eligible int64
	if err := s.SQL.Get(&eligible, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1`); err != nil {
		t.Fatal(err)
	}
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "paced", "audience": map[string]any{"all": true}, "max_rate": 50}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	planned := s.WaitPlanned(b.ID, 2*time.Minute)
	sent := planned.Succeeded + planned.Failed + planned.Canceled + planned.Capped
	took := planned.PlannedAt.Sub(planned.CreatedAt)
	t.Logf("%d of %d tokens targeted after %v, %d sent by then", planned.Targeted, n, took.Round(time.Millisecond), sent)
	if planned.Final() || planned.Targeted != eligible {
		t.Fatalf("planned: %+v, want running with all %d eligible tokens targeted", planned, eligible)
	}
	var inChunks int64
	if err := s.SQL.Get(&inChunks, "SELECT COALESCE(SUM(targets), 0) FROM broadcast_chunks WHERE broadcast_id = ?", b.ID); err != nil {
		t.Fatal(err)
	}
	if inChunks != eligible {
		t.Fatalf("the chunks hold %d targets, targeted is %d", inChunks, eligible)
	}
	// The plan never yielded to its own paced sends (it did for 9 times
	// as long as it read, before): its log line says how long it rested.
	line := planLog(t, s, b.ID)
	planTook, rested := logDuration(t, line, "took"), logDuration(t, line, "rested")
	t.Logf("the plan took %v and rested %v of it", planTook, rested)
	if rested > planTook/5 {
		t.Fatalf("the plan rested %v of its %v beside its own pace", rested, planTook)
	}
	// A handful: at 50/s, 25 s of sends.
	if sent > 50*25 {
		t.Fatalf("%d sent before the audience was counted (after %v): the plan waited for the pace", sent, took)
	}
	var c teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcasts/"+itoa(b.ID)+"/cancel", nil, &c); resp.StatusCode != http.StatusOK || c.Status != "canceled" ||
		c.Targeted != eligible || c.Succeeded+c.Failed+c.Canceled+c.Capped != c.Targeted {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
}

// planLog is the "broadcast planned" log line of broadcast id.
func planLog(t *testing.T, s *teststack.Stack, id uint64) map[string]any {
	t.Helper()
	for _, l := range strings.Split(s.LogText(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "broadcast planned" {
			continue
		}
		if bid, _ := m["broadcast_id"].(float64); uint64(bid) == id {
			return m
		}
	}
	t.Fatalf("no \"broadcast planned\" log line for broadcast %d", id)
	return nil
}

// logDuration reads a duration attribute of a JSON log line (nanoseconds,
// or Go's text form).
func logDuration(t *testing.T, m map[string]any, key string) time.Duration {
	t.Helper()
	switch v := m[key].(type) {
	case float64:
		return time.Duration(v)
	case string:
		d, err := time.ParseDuration(v)
		if err == nil {
			return d
		}
	}
	t.Fatalf("log line %v: %s is no duration", m, key)
	return 0
}

// rawBroadcast is a broadcast object as JSON values, to tell null from 0.
func rawBroadcast(t *testing.T, s *teststack.Stack, id uint64) map[string]any {
	t.Helper()
	var m map[string]any
	if resp := s.Do("GET", "/push/broadcasts/"+itoa(id), nil, &m); resp.StatusCode != http.StatusOK {
		t.Fatalf("read %d: %d %v", id, resp.StatusCode, m)
	}
	return m
}

// counting reports whether a broadcast object says its audience is being
// counted: targeted present and null, never 0, and planning as want.
func counting(t *testing.T, what string, m map[string]any, planning bool) {
	t.Helper()
	v, ok := m["targeted"]
	if !ok || v != nil || m["planning"] != planning {
		t.Fatalf("%s: targeted %v (present %v), planning %v; want targeted null, planning %v", what, v, ok, m["planning"], planning)
	}
}

// A send_at_local broadcast answers its 202 with targeted null and
// planning true (it read targeted 0 until its plan had counted), and has
// its exact targeted, planning false, once the plan is done; a scheduled
// broadcast and a held one read null too until their audience is counted,
// and /push/stats adds a broadcast's targeted only once it is known.
func TestTargetedIsNullUntilTheAudienceIsCounted(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	n := int64(s.SeedZoned(300, 2, scaleZones))
	all := map[string]any{"all": true}

	var sub map[string]any
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "noon", "audience": all, "send_at_local": tomorrowNoon()}, &sub); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %v", resp.StatusCode, sub)
	}
	counting(t, "send_at_local's 202", sub, true)
	id := uint64(sub["id"].(float64))
	planned := s.WaitPlanned(id, time.Minute)
	if m := rawBroadcast(t, s, id); m["targeted"] != float64(n) || m["planning"] != false || planned.Status != "queued" || waiting(planned) != n {
		t.Fatalf("planned: targeted %v planning %v, %+v; want %d targets, all waiting", m["targeted"], m["planning"], planned, n)
	}

	var sched map[string]any
	at := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "later", "audience": all, "send_at": at}, &sched); resp.StatusCode != http.StatusAccepted || sched["status"] != "scheduled" {
		t.Fatalf("schedule: %d %v", resp.StatusCode, sched)
	}
	counting(t, "a scheduled broadcast", sched, false)

	// A held broadcast: null until its background count lands, then the
	// count (an empty audience's 0 included: 0 is a count, not "unknown").
	var held map[string]any
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "held", "audience": all, "hold": true}, &held); resp.StatusCode != http.StatusAccepted || held["status"] != "held" {
		t.Fatalf("hold: %d %v", resp.StatusCode, held)
	}
	heldID := uint64(held["id"].(float64))
	if held["targeted"] != nil && held["targeted"] != float64(n) {
		t.Fatalf("held 202: targeted %v; want null (or, counted already, %d)", held["targeted"], n)
	}
	teststack.WaitEvery(t, "the held broadcast counted", 10*time.Second, 20*time.Millisecond, func() bool {
		return rawBroadcast(t, s, heldID)["targeted"] == float64(n)
	})

	// A broadcast whose plan has counted part of its audience while its
	// first sends go out: its targeted is not in the totals yet, its
	// outcomes are.
	s.MustExec(`INSERT INTO broadcasts (id, status, message, audience, targeted, succeeded, planning, started_at)
		VALUES (777, 'running', '{"title":"x"}', '{"all":true}', 5000, 40, 1, UTC_TIMESTAMP(6))`)
	counting(t, "a broadcast planned while it sends", rawBroadcast(t, s, 777), true)
	var st struct{ Targeted, Succeeded int64 }
	s.Do("GET", "/push/stats", nil, &st)
	if st.Targeted != 2*n || st.Succeeded != 40 { // the send_at_local's and the held one's counts; not the scheduled or the planning one
		t.Fatalf("stats: %+v; want targeted %d (the counted broadcasts only), succeeded 40", st, 2*n)
	}
	for _, id := range []uint64{id, uint64(sched["id"].(float64)), heldID} {
		s.Do("POST", "/push/broadcasts/"+itoa(id)+"/cancel", nil, nil)
	}
}

// A broadcast's users_targeted is its users, each once however many
// devices it reaches of theirs, in chunks of 100 tokens: 400 users with 2
// tokens each, user 1 with a third far above the others (another chunk),
// user 3's first token dead (its second is reached), user 7's pushes off.
// The broadcast object and the list answer it; a named audience's users
// are its rows' (its SQL reads user 7's too); a scheduled broadcast's is
// null (nothing planned yet).
func TestUsersTargetedCountsEachUserOnce(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.ChunkWidth = 100
		c.Audiences = []audience.Definition{{Name: "live", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t" +
			" WHERE t.id > :after AND t.invalidated_at IS NULL ORDER BY t.id LIMIT :limit"}}
	}})
	s.SeedZoned(400, 2, nil)
	s.MustExec("INSERT INTO device_tokens (id, user_id, token) VALUES (5000, 1, 'third-1')")
	s.MustExec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE token = 'z-3-0'")
	s.MustExec("UPDATE users SET push_enabled = 0 WHERE id = 7")
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "users", "audience": map[string]any{"all": true}}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	done := s.WaitFinished(b.ID, time.Minute)
	var got teststack.Broadcast
	teststack.WaitEvery(t, "users_targeted", time.Minute, 20*time.Millisecond, func() bool {
		got = teststack.Broadcast{}
		s.Do("GET", "/push/broadcasts/"+itoa(b.ID), nil, &got)
		return got.UsersTargeted != nil
	})
	const devices, users = 800 + 1 - 1 - 2, 400 - 1
	if done.Targeted != devices || *got.UsersTargeted != users {
		t.Fatalf("%+v, users %d: want %d devices, %d users", done, *got.UsersTargeted, devices, users)
	}
	var list struct {
		Broadcasts []teststack.Broadcast `json:"broadcasts"`
	}
	s.Do("GET", "/push/broadcasts", nil, &list)
	if len(list.Broadcasts) != 1 || list.Broadcasts[0].UsersTargeted == nil || *list.Broadcasts[0].UsersTargeted != users {
		t.Fatalf("list: %+v, want the broadcast with %d users", list.Broadcasts, users)
	}
	var named teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "named", "audience": map[string]any{"name": "live"}}, &named); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit named: %d %+v", resp.StatusCode, named)
	}
	namedID := named.ID
	s.WaitFinished(namedID, time.Minute)
	teststack.WaitEvery(t, "a named audience's users_targeted", time.Minute, 20*time.Millisecond, func() bool {
		named = teststack.Broadcast{}
		s.Do("GET", "/push/broadcasts/"+itoa(namedID), nil, &named)
		return named.UsersTargeted != nil
	})
	if named.Targeted != 800 || *named.UsersTargeted != 400 {
		t.Fatalf("named: %d devices, %d users; want 800 and 400", named.Targeted, *named.UsersTargeted)
	}
	var raw map[string]any
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "later", "audience": map[string]any{"all": true}, "send_at": at}, &raw); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("schedule: %d %v", resp.StatusCode, raw)
	}
	if v, ok := raw["users_targeted"]; !ok || v != nil {
		t.Fatalf("a scheduled broadcast's users_targeted: %v (present %v), want null", v, ok)
	}
}
