package caps_test

import (
	"fmt"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// seedInterleaved inserts users 1..n with 1 + i%3 devices each, the k-th
// device of every user after the (k-1)-th of all of them: a user's devices
// lie far apart in token order, in different pages and chunks. It returns
// each token's user.
func seedInterleaved(s *teststack.Stack, n int, prefix string) map[string]uint64 {
	s.T.Helper()
	s.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", n))
	s.MustExec(fmt.Sprintf(`INSERT INTO device_tokens (user_id, token)
		SELECT u.seq, CONCAT('%s', u.seq, '-', k.seq) FROM seq_1_to_%d u JOIN seq_0_to_2 k
		WHERE k.seq <= u.seq %% 3 ORDER BY k.seq, u.seq`, prefix, n))
	tokens := map[string]uint64{}
	rows, err := s.SQL.Query("SELECT token, user_id FROM device_tokens WHERE token LIKE ?", prefix+"%")
	if err != nil {
		s.T.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tok string
		var user uint64
		if err := rows.Scan(&tok, &user); err != nil {
			s.T.Fatal(err)
		}
		tokens[tok] = user
	}
	if err := rows.Err(); err != nil {
		s.T.Fatal(err)
	}
	return tokens
}

func capStack(t *testing.T, spec string) *teststack.Stack {
	t.Helper()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.FrequencyCap = spec }})
	s.Emu.RecordMessages()
	return s
}

func submit(s *teststack.Stack, body map[string]any) teststack.Broadcast {
	s.T.Helper()
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", body, &b)
	if resp.StatusCode/100 != 2 || b.ID == 0 {
		s.T.Fatalf("submit %v: HTTP %d, %+v", body, resp.StatusCode, b)
	}
	return b
}

func checkSums(t *testing.T, b teststack.Broadcast) {
	t.Helper()
	if got := b.Succeeded + b.Failed + b.Canceled + b.Capped; got != b.Targeted {
		t.Errorf("broadcast %d: succeeded %d + failed %d + canceled %d + capped %d = %d, targeted %d",
			b.ID, b.Succeeded, b.Failed, b.Canceled, b.Capped, got, b.Targeted)
	}
}

// The race: a cap of 1/day, two concurrent "all" broadcasts over
// 5,000 users with 1-3 devices each, on two instances. From the emulator:
// every device got exactly one message, every user's devices the same
// broadcast; the broadcasts' succeeded add up to the tokens, and so do
// their capped.
func TestTwoRacingBroadcastsGiveEachUserExactlyOne(t *testing.T) {
	s := capStack(t, "1/day")
	second := s.AddInstance()
	tokens := seedInterleaved(s, 5000, "race-")
	a := submit(s, map[string]any{"title": "A", "body": "first", "audience": map[string]any{"all": true}})
	var b teststack.Broadcast
	s.DoURL(second.API.URL, "POST", "/push/broadcast?wait=false", map[string]any{"title": "B", "body": "second", "audience": map[string]any{"all": true}}, &b)
	if b.ID == 0 {
		t.Fatal("the second submit stored nothing")
	}
	fa, fb := s.WaitFinished(a.ID, 2*time.Minute), s.WaitFinished(b.ID, 2*time.Minute)
	for _, f := range []teststack.Broadcast{fa, fb} {
		if f.Status != "completed" || f.FrequencyCap == nil || *f.FrequencyCap != "1/day" {
			t.Fatalf("broadcast %d: status %s, frequency_cap %v; want completed under 1/day", f.ID, f.Status, f.FrequencyCap)
		}
		checkSums(t, f)
	}
	n := int64(len(tokens))
	t.Logf("%d tokens of 5,000 users: A succeeded %d capped %d, B succeeded %d capped %d", n, fa.Succeeded, fa.Capped, fb.Succeeded, fb.Capped)
	if fa.Succeeded+fb.Succeeded != n || fa.Capped+fb.Capped != n {
		t.Fatalf("succeeded %d + %d and capped %d + %d, want each pair to add up to the %d tokens", fa.Succeeded, fb.Succeeded, fa.Capped, fb.Capped, n)
	}
	byUser := map[uint64]string{}
	got := map[string]int64{}
	for tok, user := range tokens {
		if c := s.Emu.Counts(tok); c.Accepted != 1 {
			t.Fatalf("token %s of user %d: the emulator accepted %d messages, want exactly 1", tok, user, c.Accepted)
		}
		rec, ok, err := s.Emu.LastNotification(tok)
		if err != nil || !ok {
			t.Fatalf("token %s: no message recorded (%v)", tok, err)
		}
		if prev, seen := byUser[user]; seen && prev != rec.Title {
			t.Fatalf("user %d got %s on one device and %s on another", user, prev, rec.Title)
		}
		byUser[user] = rec.Title
		got[rec.Title]++
	}
	if got["A"] != fa.Succeeded || got["B"] != fb.Succeeded {
		t.Errorf("the emulator got %d of A and %d of B; the broadcasts say %d and %d", got["A"], got["B"], fa.Succeeded, fb.Succeeded)
	}
	// Every user has had the day's send: the compose preview says all
	// would be capped, and a list of three users sent bulk says three (a
	// transactional one is exempt).
	for _, c := range []struct {
		audience map[string]any
		want     int64
	}{{map[string]any{"all": true}, 5000}, {map[string]any{"user_ids": []uint64{1, 2, 3}}, 3}} {
		var preview struct {
			Count       int64  `json:"count"`
			CappedUsers *int64 `json:"capped_users"`
		}
		s.Do("POST", "/push/preview", map[string]any{"audience": c.audience, "class": "bulk"}, &preview)
		if preview.CappedUsers == nil || *preview.CappedUsers != c.want {
			t.Errorf("preview of %v: capped_users %v, want %d", c.audience, preview.CappedUsers, c.want)
		}
	}
	// A test send reaches a user the cap holds, and takes no slot.
	var report struct {
		Succeeded int64 `json:"succeeded"`
	}
	s.Do("POST", "/push/test", map[string]any{"title": "T", "body": "test", "user_ids": []uint64{1}}, &report)
	var slots int
	if err := s.SQL.QueryRow("SELECT COUNT(*) FROM frequency_slots").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if report.Succeeded != 2 || slots != 5000 {
		t.Errorf("test send to user 1 (2 devices, capped today): %d succeeded, the ledger holds %d slots; want 2 sent and 5,000 slots", report.Succeeded, slots)
	}
	var stats struct {
		Succeeded, Capped int64
	}
	s.Do("GET", "/push/stats", nil, &stats)
	if stats.Succeeded != n || stats.Capped != n {
		t.Errorf("/push/stats: succeeded %d, capped %d; want %d each", stats.Succeeded, stats.Capped, n)
	}
}

// A canceled broadcast gives back the slots of the users it did not send
// to, and a dead token's user is released too: the next broadcast reaches
// exactly the users the first did not, so no user ends both capped and
// unsent. A bypass and a transactional broadcast go past the cap.
func TestCancelAndDeadTokensReleaseAndBypassGoesPast(t *testing.T) {
	s := capStack(t, "1/day")
	// Users 3001..3050 have one device, dead (the emulator answers
	// UNREGISTERED), read first: their slots are released at the
	// checkpoint that stores the failures.
	s.MustExec("INSERT INTO users (id) SELECT seq FROM seq_3001_to_3050")
	s.MustExec("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('unregistered-', seq) FROM seq_3001_to_3050")
	tokens := seedInterleaved(s, 3000, "c-")
	for tok, user := range tokens {
		if user > 3000 {
			delete(tokens, tok)
		}
	}

	a := submit(s, map[string]any{"title": "A", "body": "paced", "audience": map[string]any{"all": true}, "max_rate": 1000})
	teststack.WaitEvery(t, "broadcast A to send 1,000 messages", time.Minute, 20*time.Millisecond, func() bool {
		var b teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", a.ID), nil, &b)
		return b.Succeeded >= 1000
	})
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", a.ID), nil, nil); resp.StatusCode/100 != 2 {
		t.Fatalf("cancel: HTTP %d", resp.StatusCode)
	}
	fa := s.WaitFinished(a.ID, time.Minute)
	checkSums(t, fa)
	if fa.Status != "canceled" || fa.Canceled == 0 || fa.Failed != 50 {
		t.Fatalf("A: status %s with %d canceled and %d failed; want canceled midway, the 50 dead tokens failed", fa.Status, fa.Canceled, fa.Failed)
	}
	var deadHeld int
	if err := s.SQL.QueryRow("SELECT COUNT(*) FROM frequency_slots WHERE user_id > 3000").Scan(&deadHeld); err != nil {
		t.Fatal(err)
	}
	if deadHeld != 0 {
		t.Errorf("%d users whose only device is dead still hold a slot", deadHeld)
	}

	b := submit(s, map[string]any{"title": "B", "body": "after", "audience": map[string]any{"all": true}})
	fb := s.WaitFinished(b.ID, 2*time.Minute)
	checkSums(t, fb)
	t.Logf("A: succeeded %d canceled %d failed %d capped %d; B: succeeded %d capped %d", fa.Succeeded, fa.Canceled, fa.Failed, fa.Capped, fb.Succeeded, fb.Capped)
	// Every user got exactly one of A and B, B on all of its devices.
	users := map[uint64]map[string]int{}
	for tok, user := range tokens {
		c := s.Emu.Counts(tok)
		if c.Accepted > 1 {
			t.Fatalf("token %s of user %d got %d messages under 1/day", tok, user, c.Accepted)
		}
		if users[user] == nil {
			users[user] = map[string]int{}
		}
		if rec, ok, _ := s.Emu.LastNotification(tok); ok && c.Accepted == 1 {
			users[user][rec.Title]++
		} else {
			users[user][""]++
		}
	}
	for user, got := range users {
		switch {
		case got["A"] > 0 && got["B"] > 0:
			t.Fatalf("user %d got both A and B under 1/day: %v", user, got)
		case got["A"] == 0 && got["B"] == 0:
			t.Fatalf("user %d got neither A (canceled before it) nor B: capped and unsent", user)
		case got["B"] > 0 && got[""] > 0:
			t.Fatalf("user %d got B on some devices only: %v", user, got)
		}
	}

	// An alert goes out anyway, and says so; so does a transactional one.
	c := submit(s, map[string]any{"title": "C", "body": "alert", "audience": map[string]any{"all": true}, "frequency_cap": false})
	fc := s.WaitFinished(c.ID, 2*time.Minute)
	if fc.Capped != 0 || fc.FrequencyCap != nil || fc.Succeeded != int64(len(tokens)) {
		t.Errorf("bypass: succeeded %d of %d, capped %d, frequency_cap %v; want all sent, none capped, null", fc.Succeeded, len(tokens), fc.Capped, fc.FrequencyCap)
	}
	d := submit(s, map[string]any{"title": "D", "body": "reset", "audience": map[string]any{"user_ids": []uint64{1, 2}}, "class": "transactional"})
	fd := s.WaitFinished(d.ID, time.Minute)
	if fd.Capped != 0 || fd.FrequencyCap != nil || fd.Succeeded != 2+3 {
		t.Errorf("transactional: succeeded %d, capped %d, frequency_cap %v; want user 1's and 2's 5 devices sent, uncapped", fd.Succeeded, fd.Capped, fd.FrequencyCap)
	}
}

// A request whose frequency_cap is not a boolean is refused with a body
// naming the field.
func TestFrequencyCapMustBeABoolean(t *testing.T) {
	s := capStack(t, "1/day")
	var e teststack.ErrorBody
	resp := s.Do("POST", "/push/broadcast", `{"title":"x","audience":{"all":true},"frequency_cap":"no"}`, &e)
	if resp.StatusCode != 400 || e.Error.Code == "" || e.Error.Field != "frequency_cap" {
		t.Fatalf("HTTP %d %+v; want 400 naming frequency_cap", resp.StatusCode, e)
	}
}

// A target deferred by quiet hours is capped or sent when it is sent, not
// when it was planned: a broadcast whose users are all inside their quiet
// hours for a few seconds is planned first, another one sent meanwhile
// takes the day's slots, and the deferred one finds them taken.
func TestADeferredTargetIsCappedWhenItIsSent(t *testing.T) {
	s := capStack(t, "1/day")
	tokens := seedInterleaved(s, 300, "q-")
	now := time.Now().UTC()
	quiet := map[string]any{"start": now.Add(-time.Hour).Format("15:04:05"), "end": now.Add(8 * time.Second).Format("15:04:05")}
	deferred := submit(s, map[string]any{"title": "later", "body": "x", "audience": map[string]any{"all": true}, "quiet_hours": quiet})
	s.WaitPlanned(deferred.ID, time.Minute)
	now1 := submit(s, map[string]any{"title": "now", "body": "x", "audience": map[string]any{"all": true}, "quiet_hours": false})
	fn := s.WaitFinished(now1.ID, time.Minute)
	fd := s.WaitFinished(deferred.ID, time.Minute)
	n := int64(len(tokens))
	if fn.Succeeded != n || fd.Capped != n || fd.Deferred == nil || *fd.Deferred != n {
		t.Fatalf("sent at once: succeeded %d; deferred: %v deferred, capped %d, succeeded %d; want %d sent at once and all the deferred ones capped when due",
			fn.Succeeded, fd.Deferred, fd.Capped, fd.Succeeded, n)
	}
}

// A named cap given to a named audience in the configuration caps that
// audience's broadcasts, while the deployment has no cap of its own.
func TestANamedAudienceTakesItsNamedCap(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.FrequencyCaps = map[string]string{"marketing": "1/day"}
		c.Audiences = []config.Audience{{Name: "everyone", FrequencyCap: "marketing",
			SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
				"WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"}}
	}})
	tokens := seedInterleaved(s, 500, "n-")
	n := int64(len(tokens))
	var list struct {
		Named []struct {
			Name         string `json:"name"`
			FrequencyCap string `json:"frequency_cap"`
		} `json:"named"`
	}
	s.Do("GET", "/push/audiences", nil, &list)
	if len(list.Named) != 1 || list.Named[0].FrequencyCap != "marketing" {
		t.Fatalf("GET /push/audiences: %+v; want everyone with its cap marketing", list.Named)
	}
	named := map[string]any{"name": "everyone"}
	for i, want := range []struct {
		audience          map[string]any
		succeeded, capped int64
		cap               string
	}{{named, n, 0, "1/day"}, {named, 0, n, "1/day"}, {map[string]any{"all": true}, n, 0, ""}} {
		b := submit(s, map[string]any{"title": "x", "body": "y", "audience": want.audience})
		f := s.WaitFinished(b.ID, time.Minute)
		checkSums(t, f)
		got := ""
		if f.FrequencyCap != nil {
			got = *f.FrequencyCap
		}
		if f.Succeeded != want.succeeded || f.Capped != want.capped || got != want.cap {
			t.Fatalf("broadcast %d to %v: succeeded %d, capped %d, frequency_cap %q; want %d, %d, %q", i+1, want.audience, f.Succeeded, f.Capped, got, want.succeeded, want.capped, want.cap)
		}
	}
}

// A resend of a resend counts as the root of its chain in the ledger: a
// user whose first device the original reached, and whose other device
// failed in the original and in the first resend, gets the second resend
// on that device, without a second slot (it is the same send), and the
// first resend's failure gives back nothing. Counted as the first resend
// instead, the user would be capped: the original holds the day's slot.
func TestAResendOfAResendCountsAsTheOriginal(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.FrequencyCap = "1/day"
		c.Engine.MaxAttempts = 1 // each broadcast one attempt at the flaky device
	}})
	s.Emu.RecordMessages()
	s.MustExec("INSERT INTO users (id) VALUES (1)")
	s.MustExec("INSERT INTO device_tokens (user_id, token) VALUES (1, 'ok-1'), (1, 'flaky2xinternal-1')")
	orig := submit(s, map[string]any{"title": "Sale", "body": "today", "audience": map[string]any{"all": true}})
	parent := s.WaitFinished(orig.ID, time.Minute)
	if parent.Succeeded != 1 || parent.Failed != 1 {
		t.Fatalf("original: succeeded %d, failed %d; want ok-1 sent, the flaky device failed", parent.Succeeded, parent.Failed)
	}
	for i, want := range []struct{ succeeded, failed int64 }{{0, 1}, {1, 0}} {
		var r teststack.Broadcast
		if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", parent.ID), map[string]any{"codes": []string{"INTERNAL"}}, &r); resp.StatusCode/100 != 2 || r.ID == 0 {
			t.Fatalf("resend %d of broadcast %d: HTTP %d", i+1, parent.ID, resp.StatusCode)
		}
		f := s.WaitFinished(r.ID, time.Minute)
		checkSums(t, f)
		if f.Succeeded != want.succeeded || f.Failed != want.failed || f.Capped != 0 {
			t.Fatalf("resend %d (of broadcast %d): succeeded %d, failed %d, capped %d; want %d, %d, none capped",
				i+1, parent.ID, f.Succeeded, f.Failed, f.Capped, want.succeeded, want.failed)
		}
		parent = f
	}
	for tok, want := range map[string]int64{"ok-1": 1, "flaky2xinternal-1": 1} {
		if c := s.Emu.Counts(tok); c.Accepted != want {
			t.Errorf("token %s: the emulator accepted %d messages, want %d", tok, c.Accepted, want)
		}
	}
	// One slot, the original's; an answer in each of the three.
	var slots, answers int
	if err := s.SQL.QueryRow("SELECT (SELECT COUNT(*) FROM frequency_slots WHERE user_id = 1 AND broadcast_id = ?), (SELECT COUNT(*) FROM frequency_users WHERE user_id = 1)", orig.ID).Scan(&slots, &answers); err != nil {
		t.Fatal(err)
	}
	if total := count(t, s.SQL.DB, "SELECT COUNT(*) FROM frequency_slots WHERE user_id = 1"); slots != 1 || total != 1 || answers != 3 {
		t.Errorf("user 1 holds %d slots (%d of the original) and %d answers; want the original's slot only, and an answer in each broadcast", total, slots, answers)
	}
}
