package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
	"pushfan/lease/outcome"
)

type deliveriesPage struct {
	Deliveries []struct {
		BroadcastID uint64 `json:"broadcast_id"`
		Devices     []struct {
			TokenID uint64 `json:"token_id"`
			Outcome string `json:"outcome"`
			Code    string `json:"code"`
		} `json:"devices"`
	} `json:"deliveries"`
	NextAfter *uint64 `json:"next_after"`
}

// keptCounts counts broadcast id's kept outcomes by kind, each target once
// (its highest-precedence listing).
func keptCounts(t *testing.T, s *teststack.Stack, id uint64) map[string]int64 {
	t.Helper()
	rows, err := s.SQL.Query("SELECT lo, outcomes FROM target_outcomes WHERE broadcast_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	best := map[uint64]outcome.Target{}
	for rows.Next() {
		var lo uint64
		var b []byte
		if err := rows.Scan(&lo, &b); err != nil {
			t.Fatal(err)
		}
		if err := outcome.Decode(lo, b, func(o outcome.Target) bool {
			if m, ok := best[o.Cursor]; !ok || o.Kind.Precedence() > m.Kind.Precedence() {
				best[o.Cursor] = o
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]int64{}
	for _, o := range best {
		out[o.Kind.String()]++
	}
	return out
}

// Three broadcasts to 2,000 users (dead tokens among them), the third
// under a frequency cap and canceled midway: for 50 random users every
// device's outcomes in GET /push/users/{id}/deliveries are what the
// emulator received (its accepted sends, its failed attempts with their
// codes), and each broadcast's kept outcomes add up to its counters
// exactly (accepted, failed, capped; the canceled ones read before the
// cancel, the rest counted from the plan).
func TestAUsersDeliveriesAreWhatTheEmulatorReceived(t *testing.T) {
	const users = 2000
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.FrequencyCap = "2/day"
		c.Engine.TransactionalUsers = 0 // the user_ids broadcast is capped too
	}})
	pop := s.SeedPopulation(users)
	submit := func(body map[string]any) uint64 {
		t.Helper()
		var b teststack.Broadcast
		if resp := s.Do("POST", "/push/broadcast?wait=0", body, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d %+v", resp.StatusCode, b)
		}
		return b.ID
	}
	a := submit(map[string]any{"title": "first", "audience": map[string]any{"all": true}})
	fa := s.WaitFinished(a, 2*time.Minute)
	var half []uint64
	for u := uint64(1); u <= users/2; u++ {
		half = append(half, u)
	}
	b := submit(map[string]any{"title": "second", "audience": map[string]any{"user_ids": half}})
	fb := s.WaitFinished(b, 2*time.Minute)
	// The first half of the users has had its two pushes today: capped.
	c := submit(map[string]any{"title": "third", "audience": map[string]any{"all": true}, "max_rate": 400})
	deadline := time.Now().Add(time.Minute)
	for {
		var cur teststack.Broadcast
		s.Do("GET", "/push/broadcasts/"+itoa(c), nil, &cur)
		if cur.Succeeded+cur.Capped > 300 || cur.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third broadcast sent nothing in a minute: %+v", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var canceled teststack.Broadcast
	s.Do("POST", "/push/broadcasts/"+itoa(c)+"/cancel", nil, &canceled)
	fc := s.WaitFinished(c, 2*time.Minute)
	if fc.Status != "canceled" || fc.Canceled == 0 || fc.Capped == 0 {
		t.Fatalf("the third broadcast: %+v, want canceled midway with capped users", fc)
	}

	for _, f := range []teststack.Broadcast{fa, fb, fc} {
		k := keptCounts(t, s, f.ID)
		if k["accepted"] != f.Succeeded || k["failed"] != f.Failed || k["capped"] != f.Capped || k["canceled"] > f.Canceled ||
			k["accepted"]+k["failed"]+k["capped"]+k["canceled"] > f.Targeted {
			t.Fatalf("broadcast %d kept %v, counted %+v", f.ID, k, f)
		}
		if f.ID != c && k["accepted"]+k["failed"]+k["capped"] != f.Targeted {
			t.Fatalf("broadcast %d kept %v for %d targeted", f.ID, k, f.Targeted)
		}
		t.Logf("broadcast %d (%s): kept %v; counted succeeded %d failed %d capped %d canceled %d of %d", f.ID, f.Status, k, f.Succeeded, f.Failed, f.Capped, f.Canceled, f.Targeted)
		// The export: a line per kept target, in both formats; all of
		// targeted for the completed ones.
		lines := exportLines(t, s, f.ID, "ndjson", "")
		byOutcome := map[string]int64{}
		for _, l := range lines {
			var o struct {
				UserID  uint64 `json:"user_id"`
				Outcome string `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(l), &o); err != nil || o.UserID == 0 {
				t.Fatalf("line %q: %v", l, err)
			}
			byOutcome[o.Outcome]++
		}
		if len(byOutcome) != len(k) {
			t.Fatalf("broadcast %d: export %v, kept %v", f.ID, byOutcome, k)
		}
		for kind, n := range k {
			if byOutcome[kind] != n {
				t.Fatalf("broadcast %d: export %v, kept %v", f.ID, byOutcome, k)
			}
		}
		if f.ID != c && int64(len(lines)) != f.Targeted {
			t.Fatalf("broadcast %d: %d lines exported, %d targeted", f.ID, len(lines), f.Targeted)
		}
		if csv := exportLines(t, s, f.ID, "csv", ""); len(csv) != len(lines)+1 || csv[0] != "user_id,token_id,outcome,code" {
			t.Fatalf("broadcast %d: %d csv lines (header %q), %d ndjson", f.ID, len(csv), csv[0], len(lines))
		}
		if failed := exportLines(t, s, f.ID, "ndjson", "failed"); int64(len(failed)) != f.Failed {
			t.Fatalf("broadcast %d: %d failed lines, %d failed", f.ID, len(failed), f.Failed)
		}
	}

	// 50 random users: the look-up against the emulator's record.
	byUser := map[uint64][]teststack.Token{}
	for _, tok := range pop.Tokens {
		byUser[tok.UserID] = append(byUser[tok.UserID], tok)
	}
	rng := rand.New(rand.NewPCG(44, 42))
	for range 50 {
		u := 1 + rng.Uint64N(users)
		var page deliveriesPage
		if resp := s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries?limit=10", u), nil, &page); resp.StatusCode != http.StatusOK {
			t.Fatalf("user %d: %d", u, resp.StatusCode)
		}
		accepted, failed := map[uint64]int64{}, map[uint64]int64{}
		codes := map[uint64]string{}
		for _, d := range page.Deliveries {
			for _, dv := range d.Devices {
				switch dv.Outcome {
				case "accepted":
					accepted[dv.TokenID]++
				case "failed":
					failed[dv.TokenID]++
					codes[dv.TokenID] = dv.Code
				}
			}
		}
		for _, tok := range byUser[u] {
			var id uint64
			if err := s.SQL.Get(&id, "SELECT id FROM device_tokens WHERE token = ?", tok.Token); err != nil {
				t.Fatal(err)
			}
			emu := s.Emu.Counts(tok.Token)
			if accepted[id] != emu.Accepted {
				t.Fatalf("user %d token %d (%s): %d accepted in the look-up, the emulator accepted %d (%+v)", u, id, tok.Token, accepted[id], emu.Accepted, page)
			}
			if tok.Dead != "" && (failed[id] != emu.Attempts || emu.Attempts > 0 && codes[id] != tok.Dead) {
				t.Fatalf("user %d dead token %d: %d failed (%s) in the look-up, %d attempts at the emulator answering %s", u, id, failed[id], codes[id], emu.Attempts, tok.Dead)
			}
		}
	}
}

// exportLines reads GET /push/broadcasts/{id}/outcomes whole, as lines.
func exportLines(t *testing.T, s *teststack.Stack, id uint64, format, kind string) []string {
	t.Helper()
	req, err := http.NewRequest("GET", s.API.URL+fmt.Sprintf("/push/broadcasts/%d/outcomes?format=%s&outcome=%s", id, format, kind), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	if kind == "" {
		q := req.URL.Query()
		q.Del("outcome")
		req.URL.RawQuery = q.Encode()
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export %d: %d %v %s", id, resp.StatusCode, err, raw)
	}
	text := strings.TrimSuffix(string(raw), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// Every message carries fcm_options.analytics_label as FCM receives it:
// the request's, else the category's name; the broadcast object shows it;
// a bad one is a 400 naming analytics_label.
func TestEveryMessageCarriesItsAnalyticsLabel(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Categories = []config.Category{{Name: "news"}}
		c.DefaultCategory = "news"
	}})
	s.Emu.RecordMessages()
	s.SeedTokens(1, []string{"label-a", "label-b"})
	label := func(tok string) string {
		raw, ok := s.Emu.LastMessage(tok)
		if !ok {
			t.Fatalf("no message recorded for %s", tok)
		}
		var m struct {
			FCMOptions struct {
				Label string `json:"analytics_label"`
			} `json:"fcm_options"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m.FCMOptions.Label
	}
	for _, tc := range []struct{ asked, want string }{{"spring_sale", "spring_sale"}, {"", "news"}} {
		body := map[string]any{"title": "hi", "audience": map[string]any{"all": true}}
		if tc.asked != "" {
			body["analytics_label"] = tc.asked
		}
		var b teststack.Broadcast
		if resp := s.Do("POST", "/push/broadcast?wait=0", body, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d", resp.StatusCode)
		}
		done := s.WaitFinished(b.ID, time.Minute)
		if done.AnalyticsLabel == nil || *done.AnalyticsLabel != tc.want || done.Succeeded != 2 {
			t.Fatalf("broadcast %+v, want label %q and 2 sent", done, tc.want)
		}
		for _, tok := range []string{"label-a", "label-b"} {
			if got := label(tok); got != tc.want {
				t.Fatalf("%s got label %q, want %q", tok, got, tc.want)
			}
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "hi", "audience": map[string]any{"all": true}, "analytics_label": "no spaces"}, &e); resp.StatusCode != http.StatusBadRequest || e.Error.Field != "analytics_label" {
		t.Fatalf("a bad label: %d %+v", resp.StatusCode, e)
	}
}

// A user left out for want of consent is told apart from one never in
// the audience: the look-up shows excluded, kept by the plan step; the
// export lists only the targeted (its lines equal targeted), and with
// outcome=excluded the left-out ones.
func TestAnExcludedUsersLookupSaysExcluded(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Categories = []config.Category{{Name: "ads", Consent: "table"}}
		c.DefaultCategory = "ads"
	}})
	s.SeedTokens(1, []string{"ex-1", "ex-2", "ex-3", "ex-4"})
	for _, u := range []int{1, 2} {
		s.MustExec("INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source) VALUES (?, 'ads', 1, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'test')", u)
	}
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "sale", "audience": map[string]any{"all": true}}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	done := s.WaitFinished(b.ID, time.Minute)
	if done.Targeted != 2 || done.Succeeded != 2 || done.ExcludedNoConsent != 2 {
		t.Fatalf("broadcast %+v, want 2 sent and 2 excluded", done)
	}
	for u, want := range map[int]string{1: "accepted", 2: "accepted", 3: "excluded", 4: "excluded"} {
		var page deliveriesPage
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", u), nil, &page)
		if len(page.Deliveries) != 1 || len(page.Deliveries[0].Devices) != 1 || page.Deliveries[0].Devices[0].Outcome != want {
			t.Fatalf("user %d: %+v, want one device %s", u, page, want)
		}
	}
	if lines := exportLines(t, s, b.ID, "ndjson", ""); len(lines) != 2 {
		t.Fatalf("export: %v, want the 2 targeted", lines)
	}
	if lines := exportLines(t, s, b.ID, "ndjson", "excluded"); len(lines) != 2 {
		t.Fatalf("export of the excluded: %v, want 2", lines)
	}
}

// A target quiet hours deferred shows as deferred while its chunk waits
// for the window's end (kept by the plan step); its later send, when it
// comes, outranks it.
func TestADeferredUsersLookupSaysDeferred(t *testing.T) {
	t.Parallel()
	s := quietStack(t)
	zone := zoneAt23(t)
	seedZoned(t, s, 1, "qd-", []string{zone, zone})
	b := submit(t, s, map[string]any{"title": "t", "body": "night", "audience": map[string]any{"all": true}})
	if b.Deferred == nil || *b.Deferred != 2 {
		t.Fatalf("broadcast %+v, want 2 deferred", b)
	}
	for _, u := range []int{1, 2} {
		var page deliveriesPage
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", u), nil, &page)
		if len(page.Deliveries) != 1 || len(page.Deliveries[0].Devices) != 1 || page.Deliveries[0].Devices[0].Outcome != "deferred" {
			t.Fatalf("user %d: %+v, want one device deferred", u, page)
		}
	}
	if lines := exportLines(t, s, b.ID, "ndjson", "deferred"); len(lines) != 2 {
		t.Fatalf("export of the deferred: %v, want 2", lines)
	}
}
