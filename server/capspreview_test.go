package server_test

import (
	"testing"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

type capPreview struct {
	Count        int64   `json:"count"`
	CappedUsers  *int64  `json:"capped_users"`
	FrequencyCap *string `json:"frequency_cap"`
	Source       string  `json:"frequency_cap_source"`
	Name         string  `json:"frequency_cap_name"`
}

// A preview counts the users the cap its broadcast would take would
// withhold, for named audiences too (along the walk that counts them),
// under that cap: the audience's named cap, the deployment's, none for
// an audience whose cap is off, a bypass, a transactional broadcast or a
// dry run. Counted exactly against slots set up in the ledger.
func TestPreviewCountsCappedUsersUnderTheCapTheBroadcastWouldTake(t *testing.T) {
	const sql = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
		"WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.FrequencyCap = "3/day"
		c.FrequencyCaps = map[string]string{"marketing": "1/day"}
		c.Audiences = []config.Audience{
			{Name: "everyone", FrequencyCap: "marketing", SQL: sql},
			{Name: "lapsed", FrequencyCap: "off", SQL: sql},
			{Name: "plain", SQL: sql},
		}
	}})
	// 1,500 users with a device each, and users 1..5 a second one after
	// all of them: in another page of the named audiences' walk (1,000
	// rows a page), counted once.
	s.MustExec("INSERT INTO users (id) SELECT seq FROM seq_1_to_1500")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('p-', seq) FROM seq_1_to_1500 ORDER BY seq")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('p2-', seq) FROM seq_1_to_5 ORDER BY seq")
	// The ledger: users 1..100 have had one send today, 1..40 two,
	// 1..10 three; users 50..55 hold slots 0 and 2 (two sends); users
	// 101..120 had one yesterday (expired); a user outside the audience
	// holds all three.
	live := "UTC_TIMESTAMP(6) + INTERVAL 1 DAY"
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT seq, 'day', 0, 900, " + live + " FROM seq_1_to_100")
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT seq, 'day', 1, 901, " + live + " FROM seq_1_to_40")
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT seq, 'day', 2, 902, " + live + " FROM seq_1_to_10")
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT seq, 'day', 2, 902, " + live + " FROM seq_50_to_55")
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT seq, 'day', 0, 899, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR FROM seq_101_to_120")
	s.MustExec("INSERT INTO frequency_slots (user_id, cap, slot, broadcast_id, expires_at) SELECT 99999, 'day', seq, 900, " + live + " FROM seq_0_to_2")

	named := func(name string) map[string]any { return map[string]any{"name": name} }
	for _, c := range []struct {
		what   string
		path   string
		body   map[string]any
		cap    string // "" null
		source string
		name   string
		capped int64 // -1 null
	}{
		{"a named audience takes its named cap", "/push/audiences/everyone/preview", map[string]any{}, "1/day", "named", "marketing", 100},
		{"the same through the compose preview", "/push/preview", map[string]any{"audience": named("everyone")}, "1/day", "named", "marketing", 100},
		{"bypassed", "/push/audiences/everyone/preview", map[string]any{"frequency_cap": false}, "", "bypass", "", -1},
		{"transactional: exempt", "/push/audiences/everyone/preview", map[string]any{"class": "transactional"}, "", "transactional", "", -1},
		{"transactional asking for the cap", "/push/preview", map[string]any{"audience": named("everyone"), "class": "transactional", "frequency_cap": true}, "1/day", "named", "marketing", 100},
		{"a dry run", "/push/preview", map[string]any{"audience": named("everyone"), "dry_run": true}, "", "dry_run", "", -1},
		{"a named audience without a cap of its own takes the default", "/push/audiences/plain/preview", map[string]any{}, "3/day", "default", "", 10},
		{"a named audience whose cap is off", "/push/preview", map[string]any{"audience": named("lapsed")}, "", "off", "", -1},
		{"all under the default", "/push/preview", map[string]any{"audience": map[string]any{"all": true}}, "3/day", "default", "", 10},
		{"a few user ids: transactional by default", "/push/preview", map[string]any{"audience": map[string]any{"user_ids": []uint64{1, 2, 60}}}, "", "transactional", "", -1},
		{"a few user ids sent bulk", "/push/preview", map[string]any{"audience": map[string]any{"user_ids": []uint64{1, 2, 60}}, "class": "bulk"}, "3/day", "default", "", 2},
		{"a few user ids paced: bulk", "/push/preview", map[string]any{"audience": map[string]any{"user_ids": []uint64{1, 2, 60}}, "max_rate": 10}, "3/day", "default", "", 2},
	} {
		var p capPreview
		if resp := s.Do("POST", c.path, c.body, &p); resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d", c.what, resp.StatusCode)
		}
		gotCap, gotCapped := "", int64(-1)
		if p.FrequencyCap != nil {
			gotCap = *p.FrequencyCap
		}
		if p.CappedUsers != nil {
			gotCapped = *p.CappedUsers
		}
		if gotCap != c.cap || p.Source != c.source || p.Name != c.name || gotCapped != c.capped {
			t.Errorf("%s: frequency_cap %q (%s, %q), capped_users %d; want %q (%s, %q), %d (-1: null)",
				c.what, gotCap, p.Source, p.Name, gotCapped, c.cap, c.source, c.name, c.capped)
		}
		if c.path == "/push/audiences/everyone/preview" && p.Count != 1505 {
			t.Errorf("%s: count %d, want 1,505 targets", c.what, p.Count)
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("POST", "/push/preview", map[string]any{"audience": named("everyone"), "class": "urgent"}, &e); resp.StatusCode != 400 || e.Error.Field != "class" {
		t.Errorf("a preview with class urgent: HTTP %d %+v; want 400 naming class", resp.StatusCode, e)
	}
}
