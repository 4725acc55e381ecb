package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// The deployment's quiet hours hold a named audience's bulk broadcast as
// they hold a built-in one's: each target's zone is its user's
// (users.timezone, read by user id), unless the audience returns a
// timezone column, which wins. A campaign aimed at a segment at 23:00
// does not go out at 23:00 where the operator set quiet hours.
func TestANamedAudienceKeepsTheQuietHours(t *testing.T) {
	defs := []audience.Definition{{
		Name: "vip",
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token, o.tz AS timezone FROM device_tokens t " +
			"JOIN users u ON u.id = t.user_id LEFT JOIN zone_overrides o ON o.user_id = t.user_id " +
			"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit",
	}}
	// The window ends 10 s after the configuration is made (in Configure,
	// once the database is ready: a slow template on a loaded machine
	// must not eat the window).
	var now, end time.Time
	var inside, outside []string
	s := teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			s.MustExec("CREATE TABLE zone_overrides (user_id BIGINT UNSIGNED PRIMARY KEY, tz VARCHAR(64) NULL)")
			// Users 1-3 are inside the UTC window (3 has no zone: the
			// default, UTC); 4-5 are six hours behind, outside it.
			inside = seedZoned(t, s, 1, "nq-in-", []string{"UTC", "UTC", ""})
			outside = seedZoned(t, s, 4, "nq-out-", []string{"Etc/GMT+6", "Etc/GMT+6"})
			// The audience's own column wins: user 6 is in UTC by the users
			// table but outside by the audience; user 7 the other way round;
			// user 8's override is NULL, so its users.timezone counts.
			outside = append(outside, seedZoned(t, s, 6, "nq-over-out-", []string{"UTC"})...)
			inside = append(inside, seedZoned(t, s, 7, "nq-over-in-", []string{"Etc/GMT+6"})...)
			inside = append(inside, seedZoned(t, s, 8, "nq-null-", []string{"UTC"})...)
			s.MustExec("INSERT INTO zone_overrides VALUES (6, 'Etc/GMT+6'), (7, 'UTC'), (8, NULL)")
		},
		Configure: func(c *config.Config) {
			now = time.Now().UTC()
			end = now.Add(10 * time.Second).Truncate(time.Second)
			c.Audiences = defs
			c.Engine.QuietHours = now.Add(-time.Hour).Format("15:04:05") + "-" + end.Format("15:04:05")
		},
	})
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "sale", "body": "b", "audience": map[string]any{"name": "vip"}}, &b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	b = s.WaitPlanned(b.ID, 10*time.Second)
	if b.QuietHours == nil || b.Deferred == nil || *b.Deferred != int64(len(inside)) || waiting(b) != int64(len(inside)) || b.Targeted != int64(len(inside)+len(outside)) {
		t.Fatalf("planned: %+v (want the default quiet hours, %d deferred and waiting of %d)", b, len(inside), len(inside)+len(outside))
	}
	waitUntil(t, "the users outside the quiet hours delivered", 10*time.Second, func() bool { return accepted(s, outside, 1) })
	if time.Now().Before(end.Add(-time.Second)) {
		assertNone(t, s, "inside the quiet hours", inside)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if time.Now().Before(end) {
		t.Fatalf("finished before the window's end %v", end)
	}
	if done.Status != "completed" || done.Succeeded != int64(len(inside)+len(outside)) || waiting(done) != 0 {
		t.Fatalf("finished: %+v", done)
	}
	if !accepted(s, inside, 1) || !accepted(s, outside, 1) {
		t.Fatal("want exactly one message per token")
	}
	if st := s.Emu.Stats(); st.Requests != int64(len(inside)+len(outside)) {
		t.Fatalf("the emulator got %d requests, want %d", st.Requests, len(inside)+len(outside))
	}

	// A send_at_local works on the named audience too (it was a 400).
	var l teststack.Broadcast
	resp = s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "noon", "audience": map[string]any{"name": "vip"}, "send_at_local": tomorrowNoon()}, &l)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("send_at_local on a named audience: %d %+v", resp.StatusCode, l)
	}
	l = s.WaitPlanned(l.ID, 10*time.Second)
	if l.Targeted != int64(len(inside)+len(outside)) || waiting(l) != l.Targeted {
		t.Fatalf("send_at_local planned: %+v, want every target waiting", l)
	}
}

// 200,000 targets of a named audience in 16 zones, under quiet hours
// that cover 15 of them: the plan reads the audience once and each user's
// zone once, the one zone outside the window gets it at once (chunks of
// its own, whose cursors are spread over the whole audience: each reads
// its span of the audience and keeps its own), exactly once per token,
// and the 15 others wait.
func TestANamedAudienceOf200kIn16ZonesUnderQuietHours(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("seeds 100,000 users")
	}
	const users = 100000
	now := time.Now().UTC()
	// The zones are UTC-8..UTC+8 but UTC: a window from 7.5 hours behind
	// to 8.5 hours ahead of UTC covers every zone but UTC-8 (Etc/GMT+8,
	// the users with id % 16 == 15).
	window := now.Add(-7*time.Hour-30*time.Minute).Format("15:04") + "-" + now.Add(8*time.Hour+30*time.Minute).Format("15:04")
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Audiences = scaleAudiences
		c.Engine.QuietHours = window
	}})
	n := int64(s.SeedZoned(users, 2, scaleZones))
	const outsideUsers = users / 16
	due := int64(outsideUsers * 2)
	rr := testdb.NewRowsRead(t, s.SQL)
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "sale", "audience": map[string]any{"name": "everyone"}}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	var planned teststack.Broadcast
	read := rr.During(func() { planned = s.WaitPlanned(b.ID, 2*time.Minute) }, "users")
	t.Logf("planned %d targets of a named audience in 16 zones: %v rows read", planned.Targeted, read)
	if planned.Targeted != n || planned.Deferred == nil || *planned.Deferred != n-due {
		t.Fatalf("planned: %+v, want %d targets, %d deferred", planned, n, n-due)
	}
	// The audience joins users once per target, and the zones are read
	// once per target by user id; sends have begun meanwhile (the same
	// join again for the due targets' spans).
	if max := 4*n + n/100; read["users"] > max {
		t.Fatalf("the plan read %d user rows for %d targets: want at most %d", read["users"], n, max)
	}
	waitUntil(t, "the zone outside the quiet hours delivered", 2*time.Minute, func() bool {
		return s.Emu.Stats().Requests >= due && getBroadcast(s, b.ID).Succeeded == due
	})
	for u := 1; u <= users; u++ {
		want := int64(0)
		if u%16 == 15 {
			want = 1
		}
		for k := range 2 {
			tok := fmt.Sprintf("z-%d-%d", u, k)
			if c := s.Emu.Counts(tok); c.Accepted != want || c.Attempts != want {
				t.Fatalf("token %s (zone %s): %+v, want %d message(s)", tok, scaleZones[u%16], c, want)
			}
		}
	}
	got := getBroadcast(s, b.ID)
	if got.Status != "running" || waiting(got) != n-due {
		t.Fatalf("after the due zone: %+v, want running with %d waiting", got, n-due)
	}
	var c teststack.Broadcast
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c)
	c = s.WaitFinished(b.ID, time.Minute)
	if c.Status != "canceled" || c.Succeeded != due || c.Canceled != n-due || c.Failed != 0 {
		t.Fatalf("canceled: %+v, want %d succeeded and %d canceled", c, due, n-due)
	}
	if st := s.Emu.Stats(); st.Requests != due {
		t.Fatalf("the emulator got %d requests, want %d", st.Requests, due)
	}
}
