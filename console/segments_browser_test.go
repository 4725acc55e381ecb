package console_test

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/devtools/demo"
)

// segmentsConfig declares the users' plan_code column as the attribute
// plan (docs/segments.md).
const segmentsConfig = `
schema:
  users:
    attributes:
      plan: {column: plan_code, type: string}
`

// segUser is what the segments test seeds for user i (one token each):
// platforms, app versions, locales and plans in cycles of different
// lengths, so that every combination comes up.
func segUser(i int) (platform, version, locale, plan string) {
	platform = []string{"android", "ios", "web"}[i%3]
	version = []string{"5.9.2", "5.10.0", "6.1", "4.0"}[i%4]
	locale = []string{"en", "ko", "fr", "pt-BR", "ja"}[i%5]
	plan = []string{"pro", "family", "free", "", "pro", "family", "basic"}[i%7] // "": no plan (NULL)
	return
}

// segMatches is the segment the test builds, evaluated in Go: platform is
// android, app version at least 5.10, plan pro or family.
func segMatches(i int) bool {
	platform, version, _, plan := segUser(i)
	return platform == "android" && (version == "5.10.0" || version == "6.1") && (plan == "pro" || plan == "family")
}

// TestConsoleBuildsASegmentAndSendsToIt: the builder offers the fields
// (the declared attribute too) and their operators in words; a
// three-condition segment (platform is android, app version is at least
// 5.10, plan is any of pro, family) is counted live exactly as seeded,
// with a sample of its users; saved, its page tells the filter in words
// and its version; "Send to this segment" opens compose on it, whose
// preview counts the same; and the emulator received the message on
// exactly the matching tokens, nothing on the others. An edit is version
// 2, and both versions are listed.
func TestConsoleBuildsASegmentAndSendsToIt(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(segmentsConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	const users = 84 // every combination of the cycles above: 3·4·7
	e := newEnvWith(t, users, func(db *sqlx.DB) {
		db.MustExec("ALTER TABLE users ADD COLUMN plan_code VARCHAR(16) NULL")
		for i := 1; i <= users; i++ {
			platform, version, locale, plan := segUser(i)
			var p any
			if plan != "" {
				p = plan
			}
			db.MustExec("UPDATE users SET locale = ?, plan_code = ?, push_enabled = 1 WHERE id = ?", locale, p, i)
			db.MustExec("UPDATE device_tokens SET platform = ?, app_version = ? WHERE user_id = ?", platform, version, i)
		}
	}, "PUSHFAN_CONFIG="+cfgPath)

	// What the segment should reach: the valid tokens of the matching users.
	type tok struct {
		UserID int    `db:"user_id"`
		Token  string `db:"token"`
	}
	var all []tok
	if err := e.db.Select(&all, "SELECT user_id, token FROM device_tokens WHERE invalidated_at IS NULL ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	var want []tok
	wantUsers := map[int]bool{}
	for _, x := range all {
		if segMatches(x.UserID) {
			want = append(want, x)
			wantUsers[x.UserID] = true
		}
	}
	if len(want) < 3 || len(want) == len(all) {
		t.Fatalf("%d of %d tokens match: the seed does not tell the segment apart", len(want), len(all))
	}
	t.Logf("%d of %d tokens match the segment (%d users)", len(want), len(all), len(wantUsers))

	e.signIn(senderToken)
	e.route("#/segments")
	e.page("segments")
	e.waitFor("the empty list", 10*time.Second, `document.querySelector('#segments-table tbody tr.empty') !== null`)
	e.click("#segment-new")
	e.page("segment-builder")

	// The fields, the declared attribute among them, in words.
	cond := func(n int, part string) string {
		return fmt.Sprintf("#seg-tree .group-root > .seg-group > .group-children > .seg-cond:nth-child(%d) %s", n, part)
	}
	if got := eval[string](e, "the fields offered", fmt.Sprintf(`[...document.querySelector(%q).options].map((o) => o.textContent).join('|')`, cond(1, ".cond-field"))); got !=
		"Choose a field…|Platform|App version|Language (locale)|Time zone|App|Last seen|User ID|Plan" {
		t.Fatalf("the fields offered: %q", got)
	}
	e.waitFor("the count to wait for a condition", 10*time.Second, `document.querySelector('#seg-count').dataset.state === 'idle'`)

	// 1: platform is android, picked from the suggestions.
	e.setValue(cond(1, ".cond-field"), "platform")
	e.waitFor("the string operators", 10*time.Second, fmt.Sprintf(`[...document.querySelector(%q).options].map((o) => o.textContent).join('|') === %q`,
		cond(1, ".cond-op"), "is|is not|is any of|is none of|comes after (A to Z)|is or comes after (A to Z)|comes before (A to Z)|is or comes before (A to Z)|has a value|has no value"))
	e.click(cond(1, `.chip[data-value="android"]`))
	androids := 0
	for _, x := range all {
		if p, _, _, _ := segUser(x.UserID); p == "android" {
			androids++
		}
	}
	e.waitFor("the count of the android devices", 20*time.Second, fmt.Sprintf(`document.querySelector('#seg-count').dataset.state === 'exact' && document.querySelector('#seg-count').dataset.tokens === '%d'`, androids))

	// 2: app version is at least 5.10.
	e.click("#seg-tree .group-root > .seg-group > .group-buttons .add-cond")
	e.setValue(cond(2, ".cond-field"), "app_version")
	e.setValue(cond(2, ".cond-op"), "gte")
	if got := eval[string](e, "the version operator's words", fmt.Sprintf(`document.querySelector(%q).selectedOptions[0].textContent`, cond(2, ".cond-op"))); got != "is at least" {
		t.Errorf("app_version gte reads %q, want \"is at least\"", got)
	}
	e.setValue(cond(2, ".cond-value input"), "5.10")

	// 3: plan is any of pro, family.
	e.click("#seg-tree .group-root > .seg-group > .group-buttons .add-cond")
	e.setValue(cond(3, ".cond-field"), "attributes.plan")
	e.setValue(cond(3, ".cond-op"), "in")
	// The plans offered are the data's, the most common first, with their
	// devices (no plan, NULL, is none of them).
	plans := map[string]int{}
	for _, x := range all {
		if _, _, _, plan := segUser(x.UserID); plan != "" {
			plans[plan]++
		}
	}
	byCount := slices.SortedFunc(maps.Keys(plans), func(a, b string) int {
		if c := cmp.Compare(plans[b], plans[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var offered []string
	for _, p := range byCount {
		offered = append(offered, fmt.Sprintf("%s:%d", p, plans[p]))
	}
	e.waitFor("the plans in the data, with their devices", 10*time.Second, fmt.Sprintf(`[...document.querySelectorAll(%q)].map((c) => c.dataset.value + ':' + c.dataset.tokens).join('|') === %q`,
		cond(3, ".chip"), strings.Join(offered, "|")))
	e.setValue(cond(3, ".cond-value input"), "pro, family")

	// The live count: exactly what was seeded, with a sample of them.
	e.waitFor("the count of the segment", 20*time.Second, fmt.Sprintf(`(() => { const c = document.querySelector('#seg-count');
		return c.dataset.state === 'exact' && c.dataset.tokens === '%d' && c.dataset.users === '%d' })()`, len(want), len(wantUsers)))
	sample := eval[string](e, "the sample", text("#count-sample"))
	if sample == "" {
		t.Fatal("no sample of users shown")
	}
	for _, s := range strings.Split(sample, ", ") {
		id, err := strconv.Atoi(strings.TrimPrefix(s, "user "))
		if err != nil || !wantUsers[id] {
			t.Errorf("the sample shows %q, not a user of the segment (sample %q)", s, sample)
		}
	}
	e.shot("builder")

	// A mistake the API finds is shown next to its condition: a plan's
	// value too long for the column's check (255 bytes).
	e.expectBrowserError("400")
	e.setValue(cond(3, ".cond-value input"), "pro, "+strings.Repeat("x", 300))
	e.waitFor("the API's mistake next to the plan condition", 20*time.Second, fmt.Sprintf(`(() => {
		const err = document.querySelector(%q);
		return err !== null && err.dataset.errorFor.startsWith('filter.and[2].value') && document.querySelector('#seg-count').dataset.state === 'error' })()`,
		cond(3, ".field-error")))
	e.setValue(cond(3, ".cond-value input"), "pro, family")
	e.waitFor("the count again, the mistake gone", 20*time.Second, fmt.Sprintf(`document.querySelector('#seg-count').dataset.tokens === '%d' && document.querySelector('#seg-count').dataset.state === 'exact' && !document.querySelector('#seg-tree .field-error')`, len(want)))

	// Save it.
	e.setValue("#seg-name", "android-paid")
	e.setValue("#seg-description", "Paying Android users on 5.10 or later")
	e.click("#seg-save")
	e.page("segment")
	e.waitFor("the segment's page", 10*time.Second, `location.hash === '#/segments/android-paid'`)
	words := eval[string](e, "the filter in words", `document.querySelector('#segment-filter').innerText`)
	for _, w := range []string{"All of:", "Platform is android", "App version is at least 5.10", "Plan is any of pro, family"} {
		if !strings.Contains(words, w) {
			t.Errorf("the filter in words %q lacks %q", words, w)
		}
	}
	e.waitFor("the saved segment's count", 20*time.Second, fmt.Sprintf(`document.querySelector('#segment-count').dataset.tokens === '%d'`, len(want)))
	if n := eval[int](e, "the versions", `document.querySelectorAll('#segment-versions tbody tr[data-version]').length`); n != 1 {
		t.Errorf("%d versions listed, want 1", n)
	}
	e.shot("segment")

	// Send to it from compose.
	e.click("#segment-send")
	e.page("compose")
	e.waitFor("compose on the segment", 10*time.Second, `document.querySelector('input[name="audience-kind"][value="segment"]').checked
		&& document.querySelector('#f-segment').value === 'android-paid'`)
	e.waitFor("the preview's count of the segment", 20*time.Second, fmt.Sprintf(`%s === '%d'`, text("#preview-count"), len(want)))
	e.setValue("#f-title", "For our paying Android users")
	e.setValue("#f-body", "Thank you")
	e.send()
	e.page("watch")
	id := e.watchedID()
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)

	var b struct {
		Targeted int64 `json:"targeted"`
		Audience struct {
			Segment *struct {
				Name    string `json:"name"`
				Version int    `json:"version"`
			} `json:"segment"`
		} `json:"audience"`
	}
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
	if b.Audience.Segment == nil || b.Audience.Segment.Name != "android-paid" || b.Audience.Segment.Version != 1 || b.Targeted != int64(len(want)) {
		t.Errorf("the broadcast: %+v (segment %+v); want android-paid version 1, %d targeted", b, b.Audience.Segment, len(want))
	}
	// The broadcast's page names the segment and the version it went to.
	e.waitFor("the segment on the broadcast's page", 10*time.Second, `(() => { const el = document.querySelector('#broadcast-segment');
		return el?.dataset.segment === 'android-paid' && el.dataset.version === '1' && el.innerText.includes('App version is at least 5.10') })()`)
	// Exactly the matching tokens (a dead one was tried, and refused), and
	// nothing for the others.
	for _, x := range all {
		c := e.emu.Counts(x.Token)
		switch {
		case !slices.Contains(want, x):
			if c.Attempts != 0 {
				t.Errorf("user %d (%v) is not in the segment but its token got %+v", x.UserID, fmt.Sprint(segUser(x.UserID)), c)
			}
		case strings.HasPrefix(x.Token, demo.DeadTokenPrefix):
			if c.Attempts != 1 || c.Accepted != 0 {
				t.Errorf("user %d's dead token: %+v, want one attempt, refused", x.UserID, c)
			}
		default:
			if c.Attempts != 1 || c.Accepted != 1 {
				t.Errorf("user %d (in the segment): %+v, want one message accepted", x.UserID, c)
			}
		}
	}

	// Duplicated, it goes to the segment again.
	e.click("#btn-duplicate")
	e.page("compose")
	e.waitFor("the duplicate on the segment", 10*time.Second, `document.querySelector('input[name="audience-kind"][value="segment"]').checked
		&& document.querySelector('#f-segment').value === 'android-paid'`)

	// Edit: version 2 (iOS instead, and none of the users in Korean or
	// Japanese or not seen for 30 days: a nested group), listed beside
	// version 1.
	e.route("#/segments/android-paid/edit")
	e.page("segment-builder")
	e.waitFor("the saved filter in the builder", 10*time.Second, fmt.Sprintf(`document.querySelector(%q).value === 'platform'
		&& document.querySelector(%q).value === 'android' && document.querySelector(%q).value === 'pro, family'
		&& document.querySelector(%q).value === 'gte'`, cond(1, ".cond-field"), cond(1, ".cond-value input"), cond(3, ".cond-value input"), cond(2, ".cond-op")))
	e.setValue(cond(1, ".cond-value input"), "ios")
	e.click("#seg-tree .group-root > .seg-group > .group-buttons .add-group")
	group := "#seg-tree .group-root > .seg-group > .group-children > .seg-group"
	inner := func(n int, part string) string {
		return fmt.Sprintf("%s > .group-children > .seg-cond:nth-child(%d) %s", group, n, part)
	}
	e.setValue(group+" > .group-head .group-mode", "none")
	e.setValue(inner(1, ".cond-field"), "locale")
	e.setValue(inner(1, ".cond-op"), "in")
	e.setValue(inner(1, ".cond-value input"), "ko, ja")
	e.click(group + " > .group-buttons .add-cond")
	e.setValue(inner(2, ".cond-field"), "last_seen")
	e.setValue(inner(2, ".cond-op"), "not_within")
	if got := eval[string](e, "the last seen operator's words", fmt.Sprintf(`document.querySelector(%q).selectedOptions[0].textContent`, inner(2, ".cond-op"))); got != "not within the last" {
		t.Errorf("last_seen not_within reads %q", got)
	}
	e.setValue(inner(2, ".cond-value input"), "30")
	if unit := eval[string](e, "the duration's unit", fmt.Sprintf(`document.querySelector(%q).value`, inner(2, ".cond-value select"))); unit != "d" {
		t.Errorf("the duration's unit is %q, want days", unit)
	}
	// Every token was seen just now (updated_at): the group leaves out
	// the Korean and Japanese users.
	v2 := 0
	for _, x := range all {
		platform, version, locale, plan := segUser(x.UserID)
		if platform == "ios" && (version == "5.10.0" || version == "6.1") && (plan == "pro" || plan == "family") && locale != "ko" && locale != "ja" {
			v2++
		}
	}
	e.waitFor("version 2's count", 20*time.Second, fmt.Sprintf(`document.querySelector('#seg-count').dataset.state === 'exact' && document.querySelector('#seg-count').dataset.tokens === '%d'`, v2))
	e.click("#seg-save")
	e.page("segment")
	e.waitFor("version 2 beside version 1", 10*time.Second, `document.querySelectorAll('#segment-versions tbody tr[data-version]').length === 2
		&& document.querySelector('#segment-filter').innerText.includes('Platform is ios')`)
	words = eval[string](e, "version 2 in words", `document.querySelector('#segment-filter').innerText`)
	for _, w := range []string{"None of:", "Language (locale) is any of ko, ja", "Last seen not within the last 30 days"} {
		if !strings.Contains(words, w) {
			t.Errorf("version 2 in words %q lacks %q", words, w)
		}
	}
	e.click(`#segment-versions tr[data-version="1"] button`)
	e.waitFor("version 1's filter", 10*time.Second, `(document.querySelector('[data-version-filter="1"]')?.innerText ?? '').includes('Platform is android')`)
	e.route("#/segments/android-paid/edit")
	e.page("segment-builder")
	e.fitsAPhone()

	// Deleted: gone from the list; the broadcast keeps what it was sent to.
	e.route("#/segments/android-paid")
	e.page("segment")
	e.click("#segment-delete")
	e.click("#confirm-ok")
	e.page("segments")
	e.waitFor("the empty list again", 10*time.Second, `document.querySelector('#segments-table tbody tr.empty') !== null`)
	e.route(fmt.Sprintf("#/broadcasts/%d", id))
	e.page("watch")
	e.waitFor("the deleted segment's version on the broadcast", 10*time.Second, `document.querySelector('#broadcast-segment')?.innerText.includes('Platform is android') ?? false`)
}

// TestConsoleSegmentCountShowsAnEstimateFirst: on a big table the
// preview's first answer is an estimate (exact false); the builder shows
// it as one ("≈ 1.2M devices (estimate)"), asks again for the exact count
// and replaces it. The tokens table here is small, so the page's fetch is
// made to answer the estimate (and to hold the exact answer a moment);
// the exact count is the server's. Then a viewer reads the segments and
// their words, with nothing to build, send or delete.
func TestConsoleSegmentCountShowsAnEstimateFirst(t *testing.T) {
	e := newEnv(t, 30)
	if code := e.api("POST", "/push/segments", map[string]any{"name": "web-users", "description": "Everyone on the web",
		"filter": map[string]any{"field": "platform", "op": "eq", "value": "web"}}, nil); code != 201 {
		t.Fatalf("creating a segment: %d", code)
	}
	// A locale no fixed list has, on users 2, 3 and 5; and one only a
	// push-disabled user has, which is not offered.
	e.db.MustExec("UPDATE users SET locale = 'gsw-CH', push_enabled = 1 WHERE id IN (2, 3, 5)")
	e.db.MustExec("UPDATE users SET locale = 'tlh', push_enabled = 0 WHERE id = 7")
	var locales []string
	if err := e.db.Select(&locales, `SELECT CONCAT(u.locale, ':', COUNT(*)) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 GROUP BY u.locale ORDER BY COUNT(*) DESC, u.locale`); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(locales, func(l string) bool { return strings.HasPrefix(l, "gsw-CH:") }) || slices.ContainsFunc(locales, func(l string) bool { return strings.HasPrefix(l, "tlh:") }) {
		t.Fatalf("the seeded locales %v: want gsw-CH and not tlh", locales)
	}
	var android int
	if err := e.db.Get(&android, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.platform = 'android'`); err != nil {
		t.Fatal(err)
	}
	e.signIn(senderToken)
	eval[bool](e, "making the preview answer an estimate first", `(() => {
		const real = window.fetch;
		window.fetch = async (url, opts) => {
			if (String(url) === '/push/segments/preview') {
				if (!JSON.parse(opts.body).exact) {
					return new Response(JSON.stringify({tokens: 1234567, users: 987654, sample: [7], exact: false}),
						{status: 200, headers: {'Content-Type': 'application/json'}});
				}
				await new Promise((done) => setTimeout(done, 1500));
			}
			return real(url, opts);
		};
		return true;
	})()`)
	e.route("#/segments/_new")
	e.page("segment-builder")
	cond := "#seg-tree .group-root > .seg-group > .group-children > .seg-cond:nth-child(1)"
	// The locales offered are exactly the data's (GET
	// /push/segments/values): gsw-CH with its devices, as a chip and in
	// the input's list; no fixed list's (ko), nor the push-disabled
	// user's (tlh).
	e.setValue(cond+" .cond-field", "locale")
	e.waitFor("the data's locales as chips", 10*time.Second, fmt.Sprintf(`[...document.querySelectorAll(%q)].map((c) => c.dataset.value + ':' + c.dataset.tokens).join('|') === %q`,
		cond+" .chip", strings.Join(locales, "|")))
	e.waitFor("gsw-CH in the value's list", 10*time.Second, fmt.Sprintf(`(() => {
		const input = document.querySelector(%q);
		const o = [...(input.list?.options || [])].find((o) => o.value === 'gsw-CH');
		return o !== undefined && / devices?$/.test(o.label) && input.list.options.length === %d })()`, cond+" .cond-value input", len(locales)))
	e.click(cond + ` .chip[data-value="gsw-CH"]`)
	if v := eval[string](e, "the picked locale", fmt.Sprintf(`document.querySelector(%q).value`, cond+" .cond-value input")); v != "gsw-CH" {
		t.Errorf("picking gsw-CH typed %q", v)
	}
	e.setValue(cond+" .cond-field", "platform")
	e.click(cond + ` .chip[data-value="android"]`)
	e.waitFor("the estimate", 10*time.Second, `document.querySelector('#seg-count').dataset.state === 'estimate'
		&& document.querySelector('#seg-count').textContent.startsWith('≈ 1.2M devices (estimate)')`)
	e.shot("estimate")
	e.waitFor("the exact count in its place", 10*time.Second, fmt.Sprintf(`document.querySelector('#seg-count').dataset.state === 'exact'
		&& document.querySelector('#seg-count').dataset.tokens === '%d' && !document.querySelector('#seg-count').textContent.includes('≈')`, android))

	// A viewer.
	e.click("#signout")
	e.page("signin")
	e.signIn(viewerToken)
	e.route("#/segments")
	e.page("segments")
	if eval[bool](e, "looking for the new segment button", `!!document.querySelector('#segment-new')`) {
		t.Error("a viewer is offered to build a segment")
	}
	e.click(`#segments-table tr[data-segment="web-users"] a`)
	e.page("segment")
	e.waitFor("the segment in words", 10*time.Second, `document.querySelector('#segment-filter').innerText.includes('Platform is web')`)
	if eval[bool](e, "looking for the sender's buttons", `!!document.querySelector('#segment-send, #segment-edit, #segment-delete, #segment-count')`) {
		t.Error("a viewer is offered to send to, edit, delete or count a segment")
	}
	e.route("#/segments/_new")
	e.page("segment-builder")
	if !eval[bool](e, "the builder's refusal", `!!document.querySelector('#builder-denied') && !document.querySelector('#segment-form')`) {
		t.Error("a viewer is shown the builder")
	}
}
