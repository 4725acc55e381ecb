package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// Korea's advertising rules as a category (docs/consent.md): a day
// consent, a night window with a consent of its own, and the labels.
const (
	adPrefix = "(광고) "
	adSuffix = "\n수신거부: 앱 설정 > 알림"
	dayZone  = "Etc/GMT-12" // twelve hours ahead of UTC: outside a window around UTC's now
)

// nightEnd is when the test's night window ends: 12 s from when the
// stack's configuration is made (inside Configure, after the database is
// ready, so that a slow template on a loaded machine does not eat the
// window), time enough to plan and send what is due now before it ends.
func nightEnd() time.Time { return time.Now().UTC().Add(12 * time.Second).Truncate(time.Second) }

// adCategories are an advertising category whose night window is UTC's
// last hour up to end (so a UTC user is inside it, a dayZone user not),
// consents as given, and a service category that needs none.
func adCategories(consent, night string, end time.Time) []config.Category {
	window := end.Add(-time.Hour).Format("15:04:05") + "-" + end.Format("15:04:05")
	return []config.Category{
		{Name: "advertising", Consent: consent, Night: &config.CategoryNight{Window: window, Consent: night},
			TitlePrefix: adPrefix, BodySuffix: adSuffix},
		{Name: "service"},
	}
}

// consentUser is one user of the mixed audience: its zone, its consents.
type consentUser struct {
	id           int
	zone         string
	granted      bool
	night        bool
	withdrawLate bool // withdraws the day consent while its send waits for the night's end
	tok          string
}

// The mixed audience: in the day zone, one without consent, one with,
// one who withdrew (a granted = 0 row); inside the night window (UTC),
// one without night consent (waits for its end), one with (now), one
// without night consent who withdraws while waiting (never sent).
func consentUsers(prefix string) []*consentUser {
	us := []*consentUser{
		{id: 1, zone: dayZone},
		{id: 2, zone: dayZone, granted: true},
		{id: 3, zone: "UTC", granted: true},
		{id: 4, zone: "UTC", granted: true, night: true},
		{id: 5, zone: dayZone},
		{id: 6, zone: "UTC", granted: true, withdrawLate: true},
	}
	for _, u := range us {
		u.tok = fmt.Sprintf("%s%d", prefix, u.id)
	}
	return us
}

// consentStore is how one deployment keeps its users and their consents:
// the bundled tables and consent table, or the app's own.
type consentStore struct {
	seed     func(s *teststack.Stack, u *consentUser)
	withdraw func(s *teststack.Stack, u *consentUser)
}

var bundledConsents = consentStore{
	seed: func(s *teststack.Stack, u *consentUser) {
		s.SeedTokens(u.id, []string{u.tok})
		s.MustExec("UPDATE users SET timezone = ? WHERE id = ?", u.zone, u.id)
		if u.granted || u.id == 5 { // user 5 has a row that says no
			s.MustExec("INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source) VALUES (?, 'advertising', ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'test')",
				u.id, u.granted, u.night)
		}
	},
	withdraw: func(s *teststack.Stack, u *consentUser) {
		s.MustExec("UPDATE user_consents SET granted = 0, night = 0 WHERE user_id = ? AND category = 'advertising'", u.id)
	},
}

func mappedConsents(db string) consentStore {
	return consentStore{
		seed: func(s *teststack.Stack, u *consentUser) {
			s.MustExec("INSERT INTO "+db+".members (member_id, tz, ad_agree, night_ad_agree) VALUES (?, ?, ?, ?)", u.id, u.zone, u.granted, u.night)
			s.MustExec("INSERT INTO "+db+".push_devices (member_id, fcm_token, os_type) VALUES (?, ?, 'android')", u.id, u.tok)
		},
		withdraw: func(s *teststack.Stack, u *consentUser) {
			s.MustExec("UPDATE "+db+".members SET ad_agree = 0 WHERE member_id = ?", u.id)
		},
	}
}

// runConsentDrill sends an advertising broadcast (body: its audience and
// category fields) to the mixed audience and checks every user against
// what the emulator received: nothing without consent, the labeled
// message now with it by day or with night consent, after the night's
// end without night consent, and nothing for the user who withdrew while
// waiting; then a service broadcast that reaches everyone.
func runConsentDrill(t *testing.T, s *teststack.Stack, cs consentStore, us []*consentUser, end time.Time, body map[string]any) {
	t.Helper()
	s.Emu.RecordMessages()
	body["title"], body["body"] = "sale", "20% off"
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=false", body, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	b = s.WaitPlanned(b.ID, 10*time.Second)
	if b.Category == nil || *b.Category != "advertising" || b.Consent == nil || b.Consent.Night == nil || b.Consent.TitlePrefix != adPrefix {
		t.Fatalf("planned: category %v, rules %+v; want advertising with its rules", b.Category, b.Consent)
	}
	// Users 1 and 5 are left out; 3 and 6 wait for the night's end.
	if b.Targeted != 4 || b.ExcludedNoConsent != 2 || b.NightDeferred != 2 || waiting(b) != 2 {
		t.Fatalf("planned: targeted %d, excluded_no_consent %d, night_deferred %d, waiting %d; want 4, 2, 2, 2",
			b.Targeted, b.ExcludedNoConsent, b.NightDeferred, waiting(b))
	}
	byID := map[int]*consentUser{}
	for _, u := range us {
		byID[u.id] = u
	}
	now := []string{byID[2].tok, byID[4].tok}
	waitUntil(t, "the day user and the night-consent user delivered", 10*time.Second, func() bool { return accepted(s, now, 1) })
	for _, tok := range now {
		got, ok, err := s.Emu.LastNotification(tok)
		if err != nil || !ok || got.Title != adPrefix+"sale" || got.Body != "20% off"+adSuffix {
			t.Fatalf("%s received %q / %q (%v, %v); want the labeled message", tok, got.Title, got.Body, ok, err)
		}
	}
	cs.withdraw(s, byID[6]) // while its send waits for the night's end
	if time.Now().Before(end.Add(-time.Second)) {
		assertNone(t, s, "inside the night window without night consent", []string{byID[3].tok, byID[6].tok})
	}
	assertNone(t, s, "without consent", []string{byID[1].tok, byID[5].tok})
	done := s.WaitFinished(b.ID, 30*time.Second)
	if time.Now().Before(end) {
		t.Fatalf("finished before the night window's end %v", end)
	}
	// User 6's consent was read again by its send: not sent, and the
	// broadcast's targeted is what got an outcome.
	if done.Status != "completed" || done.Succeeded != 3 || done.Targeted != 3 || done.Failed != 0 || waiting(done) != 0 {
		t.Fatalf("finished: %+v; want completed, 3 targeted and succeeded", done)
	}
	for _, u := range us {
		want := int64(0)
		if u.id == 2 || u.id == 3 || u.id == 4 {
			want = 1
		}
		if c := s.Emu.Counts(u.tok); c.Accepted != want || c.Attempts != want {
			t.Fatalf("user %d (%s): %+v, want %d accepted", u.id, u.tok, c, want)
		}
	}
	if st := s.Emu.Stats(); st.Requests != 3 {
		t.Fatalf("the emulator got %d requests, want 3", st.Requests)
	}

	// service needs no consent and has no night window: everyone, now.
	var sv teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "maintenance", "body": "tonight", "category": "service", "audience": map[string]any{"all": true}}, &sv)
	if resp.StatusCode != http.StatusOK || sv.Status != "completed" || sv.Succeeded != int64(len(us)) || sv.ExcludedNoConsent != 0 {
		t.Fatalf("service: %d %+v; want every one of %d users", resp.StatusCode, sv, len(us))
	}
	for _, u := range us {
		got, _, _ := s.Emu.LastNotification(u.tok)
		if got.Title != "maintenance" || strings.Contains(got.Body, adSuffix) {
			t.Fatalf("user %d got %q / %q from service: want it unlabeled", u.id, got.Title, got.Body)
		}
	}
}

// On the bundled schema with the bundled consent table.
func TestConsentOnTheBundledTable(t *testing.T) {
	var end time.Time
	us := consentUsers("cb-")
	s := teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			for _, u := range us {
				bundledConsents.seed(s, u)
			}
		},
		Configure: func(c *config.Config) {
			end = nightEnd()
			c.Categories = adCategories("table", "table", end)
		},
	})
	// No default_category: a broadcast must name one; an unknown one and a
	// label the platform override would hide are refused.
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"title": "t", "audience": map[string]any{"all": true}}, "category"},
		{map[string]any{"title": "t", "category": "promo", "audience": map[string]any{"all": true}}, "category"},
		{map[string]any{"title": "t", "category": "advertising", "audience": map[string]any{"all": true},
			"android": map[string]any{"notification": map[string]any{"title": "hidden label"}}}, "android.notification.title"},
	} {
		var e struct {
			Error struct{ Code, Message, Field string }
		}
		resp := s.Do("POST", "/push/broadcast", tc.body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Fatalf("%v: %d %+v; want a 400 naming %s", tc.body, resp.StatusCode, e, tc.field)
		}
	}
	// The preview counts who the consent leaves out, as the plan will.
	var p map[string]any
	if resp := s.Do("POST", "/push/preview", map[string]any{"audience": map[string]any{"all": true}, "category": "advertising"}, &p); resp.StatusCode != http.StatusOK ||
		p["count"] != float64(4) || p["excluded_no_consent"] != float64(2) || p["category"] != "advertising" {
		t.Fatalf("preview: %d %v; want count 4, excluded_no_consent 2", resp.StatusCode, p)
	}
	runConsentDrill(t, s, bundledConsents, us, end, map[string]any{"category": "advertising", "audience": map[string]any{"all": true}})

	// A test send is labeled as its broadcasts are (the team's own device
	// is not held to the consent: user 1 never consented).
	var rep map[string]any
	if resp := s.Do("POST", "/push/test", map[string]any{"title": "sale", "body": "b", "category": "advertising", "user_ids": []int{1}}, &rep); resp.StatusCode != http.StatusOK {
		t.Fatalf("test send: %d %v", resp.StatusCode, rep)
	}
	if got, ok, err := s.Emu.LastNotification(us[0].tok); err != nil || !ok || got.Title != adPrefix+"sale" || got.Body != "b"+adSuffix {
		t.Fatalf("test send received %q / %q (%v, %v); want it labeled", got.Title, got.Body, ok, err)
	}
}

// On the app's own tables, consent as SQL conditions on its users table.
func TestConsentOnTheAppsOwnTables(t *testing.T) {
	var end time.Time
	us := consentUsers("cm-")
	var cs consentStore
	s, db := mappedStack(t, func(c *config.Config, db string) {
		end = nightEnd()
		c.Categories = adCategories("u.ad_agree = 1", "u.night_ad_agree = 1", end)
		c.DefaultCategory = "advertising"
	})
	cs = mappedConsents(db)
	for _, u := range us {
		cs.seed(s, u)
	}
	// default_category: the broadcast names none.
	runConsentDrill(t, s, cs, us, end, map[string]any{"audience": map[string]any{"all": true}})
}

// On a named audience declared advertising: its broadcasts are in it
// without naming it, and one naming another category is refused.
func TestConsentOnANamedAudience(t *testing.T) {
	var end time.Time
	us := consentUsers("cn-")
	s := teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			for _, u := range us {
				bundledConsents.seed(s, u)
			}
		},
		Configure: func(c *config.Config) {
			end = nightEnd()
			c.Categories = adCategories("table", "table", end)
			c.DefaultCategory = "service"
			c.Audiences = []audience.Definition{{
				Name: "shoppers", Category: "advertising",
				SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
					"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit",
			}}
		},
	})
	var e map[string]any
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "category": "service", "audience": map[string]any{"name": "shoppers"}}, &e); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(e), "category") {
		t.Fatalf("service to an advertising audience: %d %v; want a 400 naming category", resp.StatusCode, e)
	}
	var p map[string]any
	if resp := s.Do("POST", "/push/audiences/shoppers/preview", map[string]any{}, &p); resp.StatusCode != http.StatusOK ||
		p["count"] != float64(4) || p["excluded_no_consent"] != float64(2) {
		t.Fatalf("named preview: %d %v; want count 4, excluded_no_consent 2", resp.StatusCode, p)
	}
	runConsentDrill(t, s, bundledConsents, us, end, map[string]any{"audience": map[string]any{"name": "shoppers"}})
}
