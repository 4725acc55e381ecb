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

// The scale tests prove the algorithm on a few hundred thousand tokens by
// counting the rows the database reads (MariaDB's table statistics), not
// by timing anything: a submit reads no target, a plan reads the audience
// once however many zones it has, and a cancel reads none either. The
// sizes themselves are measured by make bench (bench scale, 10M tokens).

// scaleZones are 16 fixed-offset IANA zones: 16 due instants for one
// send_at_local.
var scaleZones = func() []string {
	var z []string
	for h := 1; h <= 8; h++ {
		z = append(z, fmt.Sprintf("Etc/GMT-%d", h), fmt.Sprintf("Etc/GMT+%d", h))
	}
	return z
}()

// tomorrowNoon is a send_at_local that is ahead in every scaleZones zone.
func tomorrowNoon() string {
	return time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
}

var scaleAudiences = []audience.Definition{{Name: "everyone",
	SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
		"WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"}}

// Every kind of submit answers without reading a single target: the API
// instances here plan nothing (PUSHFAN_PLAN_PARALLEL=0), so what the
// tables show read during a request is the request's own work. Only a
// short user_ids list (at most 1,000 users) is planned inside its submit,
// and it reads those users' tokens only. A planning instance started afterwards
// plans an all, a resend and a user_ids list exactly.
func TestSubmitsOfEveryKindReadNoTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 150,000 users")
	}
	const users = 150000
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.PlanParallel = 0
		c.Engine.RateLimit = 2000 // the sends are not what this test is about
		c.Audiences = scaleAudiences
	}})
	n := int64(s.SeedZoned(users, 2, scaleZones))
	quiet := s.AddInstanceWith(func(c *config.Config) { c.Engine.QuietHours = "22:00-08:00" })
	rr := testdb.NewRowsRead(t, s.SQL)

	// A finished broadcast whose first 100,000 tokens failed UNAVAILABLE,
	// to resend, and a held one, counted (in the background) before the
	// measurement.
	const orig = 900000
	s.MustExec(`INSERT INTO broadcasts (id, status, message, audience, targeted, failed, finished_at, planned_at)
		VALUES (?, 'completed', '{"title":"x"}', '{"all":true}', 100000, 100000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, orig)
	s.MustExec(`INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code)
		SELECT ?, seq, (seq + 1) DIV 2, 'UNAVAILABLE' FROM seq_1_to_100000`, orig)
	held := hold(t, s, teststack.AdminToken, n, nil)

	type kind struct {
		name, url, path string
		body            map[string]any
		// want is the targets once planned; 0: canceled unplanned, its
		// kind's plan proved at this size by its own test (local time:
		// TestALocalTimePlanReadsTheAudienceOnce; quiet hours and a named
		// audience: TestANamedAudienceOf200kIn16ZonesUnderQuietHours; a
		// release plans as an all does). Planning all eight took a
		// minute of CI; the submits are what this test is about.
		want int64
	}
	all := map[string]any{"all": true}
	kinds := []kind{
		{"all", s.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all}, n},
		{"send_at_local", s.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrowNoon()}, 0},
		{"quiet_hours", s.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "quiet_hours": map[string]any{"start": "22:00", "end": "08:00"}}, 0},
		{"the default quiet hours", quiet.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all}, 0},
		{"a named audience", s.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"name": "everyone"}}, 0},
		{"a resend", s.API.URL, fmt.Sprintf("/push/broadcasts/%d/resend?wait=0", orig), map[string]any{}, 100000},
		{"a release", s.API.URL, fmt.Sprintf("/push/broadcasts/%d/release", held.ID), nil, 0},
		{"10,000 user_ids", s.API.URL, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"user_ids": tenThousand()}}, 20000},
	}
	ids := map[string]uint64{}
	for _, k := range kinds {
		var b teststack.Broadcast
		var resp *http.Response
		read := rr.During(func() { resp = s.DoURL(k.url, "POST", k.path, k.body, &b) }, "device_tokens", "users")
		if resp.StatusCode/100 != 2 || b.Status != "planning" || b.Targeted != 0 || b.Planned() {
			t.Fatalf("%s: %d %+v, want it answered planning, before any target is counted", k.name, resp.StatusCode, b)
		}
		if read["device_tokens"] != 0 || read["users"] != 0 {
			t.Fatalf("%s: the submit read %v rows: want none (the plan reads the audience, after the answer)", k.name, read)
		}
		if k.name == "the default quiet hours" && b.QuietHours == nil {
			t.Fatalf("%s: %+v has no quiet hours", k.name, b)
		}
		ids[k.name] = b.ID
	}
	// 1,000 users' tokens, planned in the submit (a short list waits for
	// no planner): those rows only.
	var uids []uint64
	for u := uint64(1); u <= 1000; u++ {
		uids = append(uids, u*13)
	}
	var listed teststack.Broadcast
	read := rr.During(func() {
		s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"user_ids": uids}}, &listed)
	}, "device_tokens", "users")
	if listed.Status != "queued" && listed.Status != "running" || listed.Targeted != 2000 || !listed.Planned() {
		t.Fatalf("1,000 user_ids: %+v, want planned at submit, 2,000 targets", listed)
	}
	// Their index entries, once per plan page: bounded by the list, never
	// by the 300,000-token table.
	if read["device_tokens"] > 3*2000 {
		t.Fatalf("1,000 user_ids: the submit read %v rows; want only their 2,000 tokens' entries", read)
	}
	t.Logf("1,000 user_ids planned in the submit: %v rows read", read)

	cancel := func(name string, id uint64) {
		t.Helper()
		var c teststack.Broadcast
		if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", id), nil, &c); resp.StatusCode != http.StatusOK || c.Status != "canceled" ||
			c.Succeeded+c.Failed+c.Canceled != c.Targeted {
			t.Fatalf("%s: cancel %d %+v", name, resp.StatusCode, c)
		}
	}
	for _, k := range kinds {
		if k.want == 0 {
			cancel(k.name, ids[k.name]) // before any instance plans it
		}
	}
	s.AddInstanceWith(func(c *config.Config) { c.Engine.PlanParallel = 2 }) // plans
	for _, k := range kinds {
		if k.want == 0 {
			continue
		}
		b := s.WaitPlanned(ids[k.name], 3*time.Minute) // 300k-target plans, one after another, on a loaded machine
		if b.Targeted != k.want {
			t.Fatalf("%s: planned %d targets, want %d", k.name, b.Targeted, k.want)
		}
		cancel(k.name, b.ID)
	}
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", listed.ID), nil, nil)
}

// A send_at_local plan over 300,000 tokens in 16 zones reads the tokens
// once, in order (where one pass per zone would read them 16 times, and
// the plan before this one read them 17; the count of its users reads
// them once more), cuts each zone's due instant
// into chunks of its own, counted, all waiting; and a cancel counts them
// from the plan, reading no token at all.
func TestALocalTimePlanReadsTheAudienceOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("seeds 150,000 users")
	}
	const users = 150000
	s := teststack.New(t, teststack.Options{})
	n := int64(s.SeedZoned(users, 2, scaleZones))
	rr := testdb.NewRowsRead(t, s.SQL)
	before := rr.Of("device_tokens", "users")
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "noon", "audience": map[string]any{"all": true}, "send_at_local": tomorrowNoon()}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	planned := s.WaitPlanned(b.ID, time.Minute)
	// Beside the plan, one statement counts its users (users_targeted):
	// a pass of its own over the tokens. Read once it is in.
	var counted teststack.Broadcast
	teststack.WaitEvery(t, "users_targeted", time.Minute, 20*time.Millisecond, func() bool {
		counted = teststack.Broadcast{}
		s.Do("GET", "/push/broadcasts/"+itoa(b.ID), nil, &counted)
		return counted.UsersTargeted != nil
	})
	after := rr.Of("device_tokens", "users")
	tokensRead, usersRead := after["device_tokens"]-before["device_tokens"], after["users"]-before["users"]
	t.Logf("planned %d targets (%d users) in 16 zones: %d token rows and %d user rows read", planned.Targeted, *counted.UsersTargeted, tokensRead, usersRead)
	// One pass of the plan and one of its users' count: every token twice,
	// every user at most once a token, plus a row or two at each page
	// boundary and the snapshot's MAX(id).
	if slack := n/1000 + 10; tokensRead > 2*n+slack || usersRead > 2*n+slack || *counted.UsersTargeted != users {
		t.Fatalf("the plan and its users' count read %d token rows and %d user rows for %d targets of %d users (counted %d): want a pass each",
			tokensRead, usersRead, n, users, *counted.UsersTargeted)
	}
	if planned.Status != "queued" || planned.Targeted != n || waiting(planned) != n {
		t.Fatalf("planned: %+v, want queued with all %d targets waiting", planned, n)
	}
	rows, err := s.Leases.Chunks(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	instants := map[string]int{}
	for _, r := range rows {
		if r.Status != "waiting" || r.Targets <= 0 || r.Targets > int64(s.Config.Engine.ChunkWidth) {
			t.Fatalf("chunk %+v: want waiting, with 1..%d targets", r, s.Config.Engine.ChunkWidth)
		}
		sum += r.Targets
	}
	var nb []time.Time
	if err := s.SQL.Select(&nb, "SELECT DISTINCT not_before FROM broadcast_chunks WHERE broadcast_id = ? ORDER BY not_before", b.ID); err != nil {
		t.Fatal(err)
	}
	for _, at := range nb {
		instants[at.UTC().Format(time.RFC3339)]++
	}
	if sum != n || len(nb) != 16 {
		t.Fatalf("%d chunks hold %d targets at %d instants %v; want %d at 16", len(rows), sum, len(nb), instants, n)
	}
	var c teststack.Broadcast
	read := rr.During(func() { s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c) }, "device_tokens", "users")
	if c.Status != "canceled" || c.Canceled != n || c.Succeeded != 0 || waiting(c) != 0 || c.Targeted != n {
		t.Fatalf("cancel: %+v, want canceled at once, all %d targets counted", c, n)
	}
	if read["device_tokens"] != 0 || read["users"] != 0 {
		t.Fatalf("the cancel read %v rows: want none (the plan counted every chunk)", read)
	}
	if st := s.Emu.Stats(); st.Requests != 0 {
		t.Fatalf("the emulator got %d requests: nothing was due", st.Requests)
	}
}

// tenThousand is 10,000 user ids spread over the seeded users.
func tenThousand() []uint64 {
	out := make([]uint64, 0, 10000)
	for u := uint64(1); u <= 10000; u++ {
		out = append(out, u*13)
	}
	return out
}
