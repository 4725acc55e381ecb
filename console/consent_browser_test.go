package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Korea's advertising rules as a category (docs/consent.md), as the
// console shows them.
const (
	adPrefix = "(광고) "
	adSuffix = "\n수신거부: 앱 설정 > 알림"
	dayZone  = "Etc/GMT-12" // twelve hours ahead of UTC: outside a window around UTC's now
)

// categoriesConfig is an advertising category (the bundled consent table,
// a night window with its own consent, the labels) and a service one,
// with no default_category: compose must name one; and a named audience
// of every user declared in advertising.
func categoriesConfig(window string) string {
	return `
categories:
  - name: advertising
    consent: table
    night:
      window: "` + window + `"
      consent: table
    title_prefix: "(광고) "
    body_suffix: "\n수신거부: 앱 설정 > 알림"
  - name: service
audiences:
  - name: ad_list
    category: advertising
    sql: |
      SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token
      FROM device_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1
      ORDER BY t.id LIMIT :limit
`
}

// TestConsoleSendsInACategoryWithConsent: compose offers the categories
// and, without a default, makes the operator pick one (the API's field
// error next to the picker); with advertising picked, the preview counts
// the devices left out for want of consent and names the night window,
// the phone and a test send show the labeled message; the broadcast page
// shows the category, the rules it ran under and its consent counts, and
// the emulator received exactly the labeled message for the consenting
// users outside the night window and nothing for the others; the one
// inside it waits, and the operator cancels it.
func TestConsoleSendsInACategoryWithConsent(t *testing.T) {
	// The night window is UTC's last hour up to end: a user in UTC is
	// inside it, one in dayZone is not. It ends after the test.
	end := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	window := end.Add(-time.Hour).Format("15:04:05") + "-" + end.Format("15:04:05")
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(categoriesConfig(window)), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 6, "PUSHFAN_CONFIG="+cfgPath)

	// Users 1 to 6, one token each: 1 never answered and 3 said no (left
	// out); 2 and 4 consented by day; 5 (in the night window, no night
	// consent) waits for its end; 6 consented at night too.
	type user struct {
		zone           string
		row            bool
		granted, night bool
	}
	users := map[int]user{
		1: {zone: dayZone},
		2: {zone: dayZone, row: true, granted: true},
		3: {zone: dayZone, row: true},
		4: {zone: dayZone, row: true, granted: true},
		5: {zone: "UTC", row: true, granted: true},
		6: {zone: "UTC", row: true, granted: true, night: true},
	}
	tokens := map[int]string{}
	rows, err := e.db.Queryx("SELECT user_id, token FROM device_tokens WHERE invalidated_at IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		var tok string
		if err := rows.Scan(&id, &tok); err != nil {
			t.Fatal(err)
		}
		if _, dup := tokens[id]; dup {
			t.Fatalf("user %d has two tokens: the seed changed", id)
		}
		tokens[id] = tok
	}
	if err := rows.Close(); err != nil || len(tokens) != len(users) {
		t.Fatalf("%d users with a token (%v), want %d", len(tokens), err, len(users))
	}
	for id, u := range users {
		if _, err := e.db.Exec("UPDATE users SET timezone = ?, push_enabled = 1 WHERE id = ?", u.zone, id); err != nil {
			t.Fatal(err)
		}
		if u.row {
			if _, err := e.db.Exec(`INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source)
				VALUES (?, 'advertising', ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'test')`, id, u.granted, u.night); err != nil {
				t.Fatal(err)
			}
		}
	}

	e.signIn(senderToken)
	e.compose("Spring sale", "20% off")
	// No default: the picker starts on no choice, and the preview waits
	// for one.
	if got := eval[string](e, "reading the picker", `(() => { const s = document.querySelector('#f-category');
		return s ? s.value + '|' + [...s.options].map((o) => o.textContent).join(',') : 'absent' })()`); got != "|Choose a category…,advertising,service" {
		t.Fatalf("the category picker: %q; want no choice among advertising and service", got)
	}
	e.waitFor("the preview to ask for a category", 10*time.Second, text("#preview-error")+` === 'Choose a category to count who can get it.'`)
	e.expectBrowserError("400")
	e.send()
	e.fieldErrorShown(`.field-error[data-error-for="category"]`, "#f-category")
	e.nothingStoredOrSent("a send without a category")

	e.setValue("#f-category", "advertising")
	e.waitFor("the preview's consent count", 20*time.Second,
		text("#preview-consent")+` === '4 devices · 2 left out: no consent to advertising' && document.querySelector('#preview-consent').dataset.excluded === '2'`)
	wantNight := fmt.Sprintf("Users inside %s–%s (their own time) without night consent get it when the window ends.",
		end.Add(-time.Hour).Format("15:04:05"), end.Format("15:04:05"))
	e.waitFor("the preview's night window", 10*time.Second, fmt.Sprintf(`%s === %q`, text("#preview-night"), wantNight))
	if n := eval[string](e, "the preview's count", text("#preview-count")); n != "4" {
		t.Errorf("the preview counts %q targets, want 4", n)
	}
	// The phone shows the message as sent: the label before the title,
	// the opt-out line after the body, on a line of its own.
	e.waitFor("the labeled phone preview", 10*time.Second, fmt.Sprintf(`%s === %q && document.querySelector('#phone-preview .phone-body').textContent === %q
		&& document.querySelector('#phone-preview .phone-body').innerText.split('\n').length === 2
		&& document.querySelectorAll('#phone-preview .phone-label').length === 2`,
		text("#phone-preview .phone-title"), adPrefix+"Spring sale", "20% off"+adSuffix))
	e.shot("compose")
	// Without a title, the label starts the body, as the server adds it.
	e.setValue("#f-title", "")
	e.waitFor("the label at the start of a title-less message", 10*time.Second, fmt.Sprintf(`%s === '' && document.querySelector('#phone-preview .phone-body').textContent === %q`,
		text("#phone-preview .phone-title"), adPrefix+"20% off"+adSuffix))
	e.setValue("#f-title", "Spring sale")

	// A test send to user 2 in the category: labeled as well.
	e.emu.RecordMessages()
	e.setValue("#f-test-user_ids", "2")
	e.click("#btn-test-send")
	e.waitFor("the test send", 20*time.Second, `document.querySelectorAll('#test-results tbody tr[data-outcome="succeeded"]').length === 1`)
	labeled := func(who string, id int) {
		t.Helper()
		got, ok, err := e.emu.LastNotification(tokens[id])
		if err != nil || !ok || got.Title != adPrefix+"Spring sale" || got.Body != "20% off"+adSuffix {
			t.Fatalf("%s: user %d received %q / %q (%v, %v); want the labeled message", who, id, got.Title, got.Body, ok, err)
		}
	}
	labeled("the test send", 2)

	e.send()
	e.page("watch")
	id := e.watchedID()
	e.waitFor("the category and its consent counts", 20*time.Second, text("#broadcast-category")+` === 'advertising'
		&& document.querySelector('#count-excluded_no_consent')?.dataset.value === '2'
		&& document.querySelector('#count-night_deferred')?.dataset.value === '1'`)
	if rules := eval[string](e, "the consent rules", text("#broadcast-consent")); !strings.Contains(rules, "the consent table") ||
		!strings.Contains(rules, adPrefix) || !strings.Contains(rules, "night consent") {
		t.Errorf("the consent rules on the page: %q; want the consent table, the night consent and the label", rules)
	}
	now := []int{2, 4, 6}
	deadline := time.Now().Add(20 * time.Second)
	for _, u := range now {
		want := int64(1)
		if u == 2 {
			want = 2 // and the test send before
		}
		for e.emu.Counts(tokens[u]).Accepted < want {
			if time.Now().After(deadline) {
				t.Fatalf("user %d: %+v; the consenting users outside the night window got nothing", u, e.emu.Counts(tokens[u]))
			}
			time.Sleep(50 * time.Millisecond)
		}
		labeled("the broadcast", u)
	}
	// User 5 waits for the window's end (an hour away: that the deferred
	// send arrives at the end is server's TestConsent* stack tests' job);
	// the operator cancels what waits.
	e.waitFor("the deferred target waiting", 20*time.Second, `document.querySelector('#count-waiting')?.dataset.value === '1'
		&& document.querySelector('#count-succeeded')?.dataset.value === '3'`)
	if c := e.emu.Counts(tokens[5]); c.Attempts != 0 {
		t.Fatalf("user 5 (inside the night window, no night consent): %+v before the window's end", c)
	}
	e.shot("waiting")
	e.click("#btn-cancel")
	e.waitFor("the confirm dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true`)
	e.click("#confirm-ok")
	e.waitFor("the broadcast to be canceled", 30*time.Second, text("#watch-status")+` === 'canceled'`)
	for u := range users {
		want := map[int]int64{1: 0, 2: 2, 3: 0, 4: 1, 5: 0, 6: 1}[u]
		if c := e.emu.Counts(tokens[u]); c.Accepted != want || c.Attempts != want {
			t.Errorf("user %d: %+v, want %d accepted", u, c, want)
		}
	}
	var b broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
	if b.Category == nil || *b.Category != "advertising" || b.ExcludedNoConsent != 2 || b.NightDeferred != 1 || b.Succeeded != 3 || b.Canceled != 1 || b.Targeted != 4 {
		t.Fatalf("the broadcast: %+v; want advertising, 2 left out, 1 deferred, 3 sent, 1 canceled", b)
	}
	e.waitFor("the final counts on the page", 10*time.Second, `Number(document.querySelector('#count-succeeded').dataset.value) === 3
		&& Number(document.querySelector('#count-canceled').dataset.value) === 1
		&& document.querySelector('#count-excluded_no_consent').dataset.value === '2'`)
	e.shot("")
	e.fitsAPhone() // the consent rules and labels too

	// Duplicate as new: the category is chosen again, and the form holds
	// the text without its labels (the phone adds them, once).
	e.click("#btn-duplicate")
	e.page("compose")
	e.waitFor("the duplicated message in its category", 10*time.Second, fmt.Sprintf(`document.querySelector('#f-category').value === 'advertising'
		&& document.querySelector('#f-title').value === 'Spring sale' && document.querySelector('#f-body').value === '20%% off'
		&& %s === %q`, text("#phone-preview .phone-title"), adPrefix+"Spring sale"))

	// A named audience declared in a category: the picker shows it, locked,
	// and the preview counts its consent; back on all users, the
	// operator's choice is back.
	e.setValue("#f-category", "service")
	e.setValue("#f-audience-name", "ad_list")
	e.waitFor("the audience's own category, locked, and its consent count", 20*time.Second, `(() => {
		const s = document.querySelector('#f-category');
		return s.value === 'advertising' && s.disabled && document.querySelector('#preview-consent').dataset.excluded === '2'
			&& document.querySelector('#preview-consent').textContent === '4 devices · 2 left out: no consent to advertising' })()`)
	e.click(`input[name="audience-kind"][value="all"]`)
	e.waitFor("the operator's choice back", 20*time.Second, `(() => {
		const s = document.querySelector('#f-category');
		return s.value === 'service' && !s.disabled && document.querySelector('#preview-night').hidden
			&& document.querySelector('#preview-consent').textContent === '6 devices · service needs no consent beyond notifications being on' })()`)
}
