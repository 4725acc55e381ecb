package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// A named audience whose query returns its cursor also as token_id is
// exported and looked up as the built-in audiences are: the broadcast
// records token_cursor, its export has a line per targeted target naming
// the token's user, and a user's look-up finds it with each device. One
// without token_id answers 409 named_audience whose body says how to fix
// it, and stays out of the look-up.
func TestANamedAudienceWithTokenIDsIsExportedAndLookedUp(t *testing.T) {
	t.Parallel()
	const tail = " FROM device_tokens t JOIN users u ON u.id = t.user_id " +
		"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Audiences = []audience.Definition{
			{Name: "by_token", SQL: "SELECT t.id AS `cursor`, t.id AS token_id, t.user_id, t.token" + tail},
			{Name: "plain", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token" + tail},
		}
	}})
	s.SeedTokens(1, []string{"nt-1", "nt-2", "nt-3", "nt-4", "nt-5"})
	s.MustExec("INSERT INTO device_tokens (id, user_id, token) VALUES (6, 2, 'nt-2b')") // user 2's second device
	send := func(name string) teststack.Broadcast {
		t.Helper()
		var b teststack.Broadcast
		if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": name, "audience": map[string]any{"name": name}}, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit %s: %d", name, resp.StatusCode)
		}
		return s.WaitFinished(b.ID, time.Minute)
	}
	byToken := send("by_token")
	plain := send("plain")
	if byToken.Targeted != 6 || byToken.Succeeded != 6 || plain.Succeeded != 6 {
		t.Fatalf("broadcasts %+v and %+v, want 6 sent each", byToken, plain)
	}
	var flag, none bool
	if err := s.SQL.QueryRow(`SELECT JSON_EXTRACT(audience, '$.token_cursor') = TRUE,
		(SELECT JSON_EXTRACT(audience, '$.token_cursor') IS NULL FROM broadcasts WHERE id = ?) FROM broadcasts WHERE id = ?`, plain.ID, byToken.ID).Scan(&flag, &none); err != nil || !flag || !none {
		t.Fatalf("stored token_cursor: %v on by_token, absent on plain %v (%v)", flag, none, err)
	}

	lines := exportLines(t, s, byToken.ID, "ndjson", "")
	want := []string{}
	for tok, user := range []int{1, 2, 3, 4, 5, 2} {
		want = append(want, fmt.Sprintf(`{"user_id":%d,"token_id":%d,"outcome":"accepted","code":""}`, user, tok+1))
	}
	if int64(len(lines)) != byToken.Targeted || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("export:\n%s\nwant (targeted %d):\n%s", strings.Join(lines, "\n"), byToken.Targeted, strings.Join(want, "\n"))
	}

	var e teststack.ErrorBody
	if resp := s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/outcomes", plain.ID), nil, &e); resp.StatusCode != http.StatusConflict ||
		e.Error.Code != "named_audience" || !strings.Contains(e.Error.Message, "return it also as token_id") {
		t.Fatalf("export of a named audience without token_id: %d %+v, want a 409 named_audience saying to return token_id", resp.StatusCode, e)
	}

	var page deliveriesPage
	if resp := s.Do("GET", "/push/users/2/deliveries", nil, &page); resp.StatusCode != http.StatusOK {
		t.Fatalf("deliveries: %d", resp.StatusCode)
	}
	got, _ := json.Marshal(page.Deliveries)
	if len(page.Deliveries) != 1 || page.Deliveries[0].BroadcastID != byToken.ID || len(page.Deliveries[0].Devices) != 2 ||
		page.Deliveries[0].Devices[0].TokenID != 2 || page.Deliveries[0].Devices[1].TokenID != 6 ||
		page.Deliveries[0].Devices[0].Outcome != "accepted" || page.Deliveries[0].Devices[1].Outcome != "accepted" {
		t.Fatalf("user 2's deliveries: %s, want broadcast %d alone with devices 2 and 6 accepted", got, byToken.ID)
	}
}

// A broadcast to a named audience with token_id canceled midway lists
// every target it counted: the ones it never read (the running chunk's
// rest, the chunks never claimed) are read again from the named audience
// and exported canceled with their users, so the lines equal targeted,
// and a user's device the cancel never read shows canceled.
func TestACanceledNamedAudienceWithTokenIDsListsEveryTargeted(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.ChunkWidth = 10
		c.Audiences = []audience.Definition{{Name: "by_token",
			SQL: "SELECT t.id AS `cursor`, t.id AS token_id, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
				"WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"}}
	}})
	const n = 40
	s.MustExec(fmt.Sprintf("INSERT INTO users (id, push_enabled) SELECT 100 + seq, 1 FROM seq_1_to_%d", n))
	s.MustExec(fmt.Sprintf("INSERT INTO device_tokens (id, user_id, token) SELECT seq, 100 + seq, CONCAT('nc-', seq) FROM seq_1_to_%d", n))
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "slow", "audience": map[string]any{"name": "by_token"}, "max_rate": 4}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var cur teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &cur)
		if cur.Succeeded >= 3 || cur.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing sent in a minute: %+v", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
	b = s.WaitFinished(b.ID, time.Minute)
	if b.Status != "canceled" || b.Targeted != n || b.Canceled == 0 || b.Succeeded+b.Canceled != n {
		t.Fatalf("broadcast %+v, want %d targeted, canceled midway", b, n)
	}
	byOutcome := map[string]int64{}
	outcomeOf := map[uint64]string{}
	lines := exportLines(t, s, b.ID, "ndjson", "")
	for _, l := range lines {
		var o struct {
			UserID  uint64 `json:"user_id"`
			TokenID uint64 `json:"token_id"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(l), &o); err != nil || o.UserID != 100+o.TokenID || outcomeOf[o.TokenID] != "" {
			t.Fatalf("line %q: %v, want each token once with its user", l, err)
		}
		outcomeOf[o.TokenID] = o.Outcome
		byOutcome[o.Outcome]++
	}
	if int64(len(lines)) != b.Targeted || byOutcome["accepted"] != b.Succeeded || byOutcome["canceled"] != b.Canceled {
		t.Fatalf("export %v (%d lines), counted %+v", byOutcome, len(lines), b)
	}
	for _, tok := range []uint64{1, n} {
		var page deliveriesPage
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", 100+tok), nil, &page)
		if len(page.Deliveries) != 1 || len(page.Deliveries[0].Devices) != 1 || page.Deliveries[0].Devices[0].Outcome != outcomeOf[tok] {
			t.Fatalf("user %d: %+v, want one device %s", 100+tok, page, outcomeOf[tok])
		}
	}
	if outcomeOf[n] != "canceled" {
		t.Fatalf("token %d: %s, want canceled (never read)", n, outcomeOf[n])
	}
}
