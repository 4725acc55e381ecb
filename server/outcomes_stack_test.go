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

// Three broadcasts to 5,000 users (dead tokens among them), the third
// under a frequency cap, with quiet hours deferring 300 users and
// canceled midway: each broadcast's export lists a line per targeted
// target whose outcomes add up to its counters exactly (accepted, failed,
// capped, canceled: the canceled ones read before the cancel, the rest it
// never read and the deferred ones it closed), and for 50 random users
// and 5 deferred ones every device's outcome in GET
// /push/users/{id}/deliveries is its export line's, and its accepted and
// failed sends are what the emulator received (its accepted sends, its
// failed attempts with their codes).
func TestAUsersDeliveriesAreWhatTheEmulatorReceived(t *testing.T) {
	const users = 5000
	const quietFrom, quietTo = 4001, 4300 // users at 23:00 for the third broadcast
	noon := zoneAtHour(t, 12)
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.FrequencyCap = "2/day"
		c.Engine.TransactionalUsers = 0 // the user_ids broadcast is capped too
		c.Engine.DefaultTimezone = noon // no user outside quietFrom..quietTo is in quiet hours
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
	fa := s.WaitFinished(a, 3*time.Minute)
	var half []uint64
	for u := uint64(1); u <= users/2; u++ {
		half = append(half, u)
	}
	b := submit(map[string]any{"title": "second", "audience": map[string]any{"user_ids": half}})
	fb := s.WaitFinished(b, 3*time.Minute)
	// The first half of the users has had its two pushes today: capped.
	// Users quietFrom..quietTo are at 23:00 in their zone: deferred.
	s.MustExec("UPDATE users SET timezone = ? WHERE id BETWEEN ? AND ?", zoneAt23(t), quietFrom, quietTo)
	c := submit(map[string]any{"title": "third", "audience": map[string]any{"all": true}, "max_rate": 400,
		"quiet_hours": map[string]any{"start": "22:00", "end": "08:00"}})
	planned := s.WaitPlanned(c, time.Minute)
	if planned.Deferred == nil || *planned.Deferred == 0 {
		t.Fatalf("the third broadcast deferred nobody: %+v", planned)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var cur teststack.Broadcast
		s.Do("GET", "/push/broadcasts/"+itoa(c), nil, &cur)
		if cur.Succeeded > 200 || cur.Final() { // past the capped first half, sending the rest at 400/s
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third broadcast sent nothing in a minute: %+v", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var canceled teststack.Broadcast
	s.Do("POST", "/push/broadcasts/"+itoa(c)+"/cancel", nil, &canceled)
	fc := s.WaitFinished(c, 3*time.Minute)
	if fc.Status != "canceled" || fc.Canceled <= *planned.Deferred || fc.Capped == 0 || fc.Succeeded == 0 {
		t.Fatalf("the third broadcast: %+v, want canceled midway with capped users and the %d deferred canceled", fc, *planned.Deferred)
	}

	// lines[broadcast][token] is the export's outcome of each target.
	lines := map[uint64]map[uint64]string{}
	for _, f := range []teststack.Broadcast{fa, fb, fc} {
		k := keptCounts(t, s, f.ID)
		if k["accepted"] != f.Succeeded || k["failed"] != f.Failed || k["capped"] != f.Capped {
			t.Fatalf("broadcast %d kept %v, counted %+v", f.ID, k, f)
		}
		// The export: a line per targeted target, in both formats, its
		// outcomes adding up to the counters exactly.
		all := exportLines(t, s, f.ID, "ndjson", "")
		byOutcome := map[string]int64{}
		lines[f.ID] = map[uint64]string{}
		for _, l := range all {
			var o struct {
				UserID  uint64 `json:"user_id"`
				TokenID uint64 `json:"token_id"`
				Outcome string `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(l), &o); err != nil || o.UserID == 0 {
				t.Fatalf("line %q: %v", l, err)
			}
			if _, twice := lines[f.ID][o.TokenID]; twice {
				t.Fatalf("broadcast %d: token %d listed twice", f.ID, o.TokenID)
			}
			lines[f.ID][o.TokenID] = o.Outcome
			byOutcome[o.Outcome]++
		}
		want := map[string]int64{"accepted": f.Succeeded, "failed": f.Failed, "capped": f.Capped, "canceled": f.Canceled}
		for kind, n := range byOutcome {
			if want[kind] != n {
				t.Fatalf("broadcast %d: export %v, counted %v", f.ID, byOutcome, want)
			}
		}
		if int64(len(all)) != f.Targeted || f.Succeeded+f.Failed+f.Capped+f.Canceled != f.Targeted {
			t.Fatalf("broadcast %d: %d lines exported (%v), %d targeted", f.ID, len(all), byOutcome, f.Targeted)
		}
		t.Logf("broadcast %d (%s): export %v of %d targeted", f.ID, f.Status, byOutcome, f.Targeted)
		if csv := exportLines(t, s, f.ID, "csv", ""); len(csv) != len(all)+1 || csv[0] != "user_id,token_id,outcome,code" {
			t.Fatalf("broadcast %d: %d csv lines (header %q), %d ndjson", f.ID, len(csv), csv[0], len(all))
		}
		if failed := exportLines(t, s, f.ID, "ndjson", "failed"); int64(len(failed)) != f.Failed {
			t.Fatalf("broadcast %d: %d failed lines, %d failed", f.ID, len(failed), f.Failed)
		}
	}
	// The deferred ones are kept as the plan deferred them, and listed
	// canceled: the cancel closed their wait.
	if d := exportLines(t, s, c, "ndjson", "deferred"); int64(len(d)) != *planned.Deferred {
		t.Fatalf("%d deferred lines, %d deferred", len(d), *planned.Deferred)
	}

	// 50 random users and 5 deferred ones: the look-up against the
	// export and the emulator's record.
	byUser := map[uint64][]teststack.Token{}
	for _, tok := range pop.Tokens {
		byUser[tok.UserID] = append(byUser[tok.UserID], tok)
	}
	rng := rand.New(rand.NewPCG(44, 42))
	sample := []uint64{quietFrom, quietFrom + 1, quietFrom + 2, quietTo - 1, quietTo}
	for range 50 {
		sample = append(sample, 1+rng.Uint64N(users))
	}
	deferredSeen := 0
	for _, u := range sample {
		var page deliveriesPage
		if resp := s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries?limit=10", u), nil, &page); resp.StatusCode != http.StatusOK {
			t.Fatalf("user %d: %d", u, resp.StatusCode)
		}
		accepted, failed := map[uint64]int64{}, map[uint64]int64{}
		codes := map[uint64]string{}
		shown := map[[2]uint64]string{}
		for _, d := range page.Deliveries {
			for _, dv := range d.Devices {
				shown[[2]uint64{d.BroadcastID, dv.TokenID}] = dv.Outcome
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
			// Each broadcast's outcome of the device is its export line's.
			for _, f := range []uint64{a, b, c} {
				if got, want := shown[[2]uint64{f, id}], lines[f][id]; got != want {
					t.Fatalf("user %d token %d in broadcast %d: %q in the look-up, %q in the export", u, id, f, got, want)
				}
			}
			if u >= quietFrom && u <= quietTo && lines[c][id] == "canceled" {
				deferredSeen++
			}
		}
	}
	if deferredSeen == 0 {
		t.Fatal("no deferred user's device was looked up")
	}
}

// zoneAtHour is a whole-hour zone whose local time is hour:xx now.
func zoneAtHour(t *testing.T, hour int) string {
	t.Helper()
	off := (hour - time.Now().UTC().Hour() + 24) % 24 // hours east of UTC
	if off > 14 {
		off -= 24 // Etc/GMT zones run from UTC-12 to UTC+14
	}
	if off == 0 {
		return "UTC"
	}
	return fmt.Sprintf("Etc/GMT%+d", -off)
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

// A token not refreshed for PUSHFAN_STALE_AFTER is kept as outcome stale:
// the look-up shows it, the export lists it only with outcome=stale (it
// was not targeted: the lines without a filter equal targeted).
func TestAStaleTokenIsKeptAsStale(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.StaleAfter = 30 * 24 * time.Hour
		c.Engine.PageSize = 10 // pages the stale ones leave short read on
	}})
	// Token id = user id; every 4th of 1..40 not refreshed for 40 days,
	// 41 fresh (a stale token past the audience's last fresh one is past
	// the last chunk's bound: read by no page).
	const n = 41
	s.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", n))
	s.MustExec(fmt.Sprintf(`INSERT INTO device_tokens (id, user_id, token, updated_at)
		SELECT seq, seq, CONCAT('sk-', seq), IF(seq %% 4 = 0 AND seq <= 40, NOW(6) - INTERVAL 40 DAY, NOW(6)) FROM seq_1_to_%d`, n))
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": map[string]any{"all": true}}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	done := s.WaitFinished(b.ID, time.Minute)
	if done.Targeted != 31 || done.Succeeded != 31 {
		t.Fatalf("broadcast %+v, want 31 targeted and sent", done)
	}
	if lines := exportLines(t, s, b.ID, "ndjson", ""); int64(len(lines)) != done.Targeted {
		t.Fatalf("export: %d lines, %d targeted", len(lines), done.Targeted)
	}
	stale := exportLines(t, s, b.ID, "ndjson", "stale")
	if len(stale) != 10 {
		t.Fatalf("export of the stale: %v, want 10", stale)
	}
	for i, l := range stale {
		if want := fmt.Sprintf(`{"user_id":%d,"token_id":%d,"outcome":"stale","code":""}`, 4*(i+1), 4*(i+1)); l != want {
			t.Fatalf("stale line %d: %s, want %s", i, l, want)
		}
	}
	for u, want := range map[int]string{4: "stale", 5: "accepted", 40: "stale"} {
		var page deliveriesPage
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", u), nil, &page)
		if len(page.Deliveries) != 1 || len(page.Deliveries[0].Devices) != 1 || page.Deliveries[0].Devices[0].Outcome != want {
			t.Fatalf("user %d: %+v, want one device %s", u, page, want)
		}
	}
}

// An app whose tokens live in its own mapped table: the look-up finds the
// user's devices there (never the bundled table's rows of the same ids),
// and the export names each target's user from it, a canceled
// broadcast's never-read targets read through the mapping too.
func TestAMappedTokensTableIsLookedUpAndExported(t *testing.T) {
	s, db := mappedStack(t, func(c *config.Config, _ string) { c.Engine.ChunkWidth = 10 })
	toks, eligible := appPopulation(s, db, "mo-", 60, nil)
	s.SeedTokens(1, []string{"bundled-1", "bundled-2"}) // ids 1 and 2 of pushfan's own table: not the app's
	var first teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "first", "audience": map[string]any{"all": true}}, &first); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	first = s.WaitFinished(first.ID, time.Minute)
	second := teststack.Broadcast{}
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "second", "audience": map[string]any{"all": true}, "max_rate": 4}, &second); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var cur teststack.Broadcast
		s.Do("GET", "/push/broadcasts/"+itoa(second.ID), nil, &cur)
		if cur.Succeeded >= 3 || cur.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second broadcast sent nothing in a minute: %+v", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Do("POST", "/push/broadcasts/"+itoa(second.ID)+"/cancel", nil, nil)
	second = s.WaitFinished(second.ID, time.Minute)
	want := countTrue(eligible)
	if first.Targeted != want || first.Succeeded != want || second.Status != "canceled" || second.Canceled == 0 || second.Targeted != want {
		t.Fatalf("broadcasts %+v and %+v, want %d targeted each, the second canceled midway", first, second, want)
	}
	// device_seq of each member's token (member i's is i: inserted in order).
	lines := map[uint64]map[uint64]string{}
	for _, b := range []teststack.Broadcast{first, second} {
		lines[b.ID] = map[uint64]string{}
		all := exportLines(t, s, b.ID, "ndjson", "")
		byOutcome := map[string]int64{}
		for _, l := range all {
			var o struct {
				UserID  uint64 `json:"user_id"`
				TokenID uint64 `json:"token_id"`
				Outcome string `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(l), &o); err != nil || o.UserID != o.TokenID || !eligible[int(o.UserID)] {
				t.Fatalf("broadcast %d line %q: %v, want an eligible member's own device", b.ID, l, err)
			}
			lines[b.ID][o.TokenID] = o.Outcome
			byOutcome[o.Outcome]++
		}
		if int64(len(all)) != b.Targeted || byOutcome["accepted"] != b.Succeeded || byOutcome["canceled"] != b.Canceled {
			t.Fatalf("broadcast %d: export %v, counted %+v", b.ID, byOutcome, b)
		}
	}
	for i := 1; i <= 60; i++ {
		var page deliveriesPage
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", i), nil, &page)
		got := map[uint64]string{}
		for _, d := range page.Deliveries {
			for _, dv := range d.Devices {
				if dv.TokenID != uint64(i) {
					t.Fatalf("member %d: device %d in broadcast %d, want only its own (%d)", i, dv.TokenID, d.BroadcastID, i)
				}
				got[d.BroadcastID] = dv.Outcome
			}
		}
		for _, b := range []uint64{first.ID, second.ID} {
			if got[b] != lines[b][uint64(i)] {
				t.Fatalf("member %d (%s) in broadcast %d: %q in the look-up, %q in the export", i, toks[i], b, got[b], lines[b][uint64(i)])
			}
		}
	}
}

// A resend updates the outcome of the targets it reached: a device the
// original failed shows the resend's outcome (accepted once it recovered,
// failed again when it did not) with its resend_id, on the original's
// delivery (the resend is not listed on its own); the devices it did not
// reach keep the original's.
func TestAResendUpdatesTheOutcomeOfTheTargetsItReached(t *testing.T) {
	s := resendStack(t)
	var orig teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "Sale", "audience": map[string]any{"all": true}}, &orig)
	orig = s.WaitFinished(orig.ID, 30*time.Second)
	var r teststack.Broadcast
	if resp := postWithKey(t, s, fmt.Sprintf("/push/broadcasts/%d/resend", orig.ID), "resend-outcomes", &r); resp.StatusCode != http.StatusOK {
		t.Fatalf("resend: %d %+v", resp.StatusCode, r)
	}
	flaky := append(append([]string{}, resendFlaky...), resendGone, resendOff) // all four recover: nothing ended them here
	if r.Status != "completed" || r.Succeeded != int64(len(flaky)) || r.Failed != int64(len(resendDown)) {
		t.Fatalf("resend: %+v", r)
	}
	type device struct {
		Outcome  string `json:"outcome"`
		Code     string `json:"code"`
		ResendID uint64 `json:"resend_id"`
	}
	// SeedTokens gives token i of the stack's list to user 1+i.
	var order []string
	order = append(order, resendOK...)
	order = append(order, resendFlaky...)
	order = append(order, resendDown...)
	order = append(order, resendDead...)
	order = append(order, resendGone, resendOff)
	want := map[string]device{}
	for _, tk := range resendOK {
		want[tk] = device{Outcome: "accepted"}
	}
	for _, tk := range flaky {
		want[tk] = device{Outcome: "accepted", ResendID: r.ID}
	}
	for _, tk := range resendDown {
		want[tk] = device{Outcome: "failed", Code: "UNAVAILABLE", ResendID: r.ID}
	}
	for _, tk := range resendDead {
		want[tk] = device{Outcome: "failed", Code: "UNREGISTERED"}
	}
	for i, tk := range order {
		var page struct {
			Deliveries []struct {
				BroadcastID uint64   `json:"broadcast_id"`
				Devices     []device `json:"devices"`
			} `json:"deliveries"`
		}
		s.Do("GET", fmt.Sprintf("/push/users/%d/deliveries", 1+i), nil, &page)
		if len(page.Deliveries) != 1 || page.Deliveries[0].BroadcastID != orig.ID || len(page.Deliveries[0].Devices) != 1 ||
			page.Deliveries[0].Devices[0] != want[tk] {
			t.Fatalf("user %d (%s): %+v, want the original's delivery with %+v", 1+i, tk, page, want[tk])
		}
	}
}
