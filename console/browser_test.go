package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"

	"pushfan/internal/devtools/apiclient"
)

// api calls the server with the sender's bearer token (setting up what a
// test then looks at in the browser).
func (e *env) api(method, path string, body any, out any) int {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+senderToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// broadcast is the API's broadcast object.
type broadcast = apiclient.Broadcast

// nothingStoredOrSent fails the test if any broadcast was stored or any
// push sent (after requests that had to be refused).
func (e *env) nothingStoredOrSent(after string) {
	e.t.Helper()
	if n, sent := e.broadcastCount(), e.emu.Stats().Requests; n != 0 || sent != 0 {
		e.t.Fatalf("%s stored %d broadcasts and sent %d pushes; want none", after, n, sent)
	}
}

func (e *env) broadcastCount() int {
	var n int
	if err := e.db.Get(&n, "SELECT COUNT(*) FROM broadcasts"); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// compose fills the compose form's message and picks the all audience.
func (e *env) compose(title, body string) {
	e.t.Helper()
	e.route("#/compose")
	e.page("compose")
	e.setValue("#f-title", title)
	e.setValue("#f-body", body)
	e.click(`input[name="audience-kind"][value="all"]`)
}

// watchedID is the broadcast id of the watch page (#/broadcasts/<id>).
func (e *env) watchedID() uint64 {
	return eval[uint64](e, "reading the watched id", `Number(location.hash.split('/').pop())`)
}

func text(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? '').trim()`, sel)
}

// TestConsoleComposeTestSendAndWatch is the main path: sign in, compose,
// see the audience counted, test-send to two users, send, and watch the
// progress reach exactly what the emulator received.
func TestConsoleComposeTestSendAndWatch(t *testing.T) {
	// Users 1–100 have a second device: the page tells users from devices.
	e := newEnvWith(t, 1500, func(db *sqlx.DB) {
		if _, err := db.Exec("INSERT INTO device_tokens (user_id, token, platform) SELECT id, CONCAT('second-', id), 'android' FROM users WHERE id <= 100"); err != nil {
			t.Fatal(err)
		}
	})
	want := e.eligibleTokens()
	var wantUsers int64 // before the send marks the dead tokens: the plan counts them
	if err := e.db.Get(&wantUsers, `SELECT COUNT(DISTINCT t.user_id) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1`); err != nil {
		t.Fatal(err)
	}
	e.signIn(senderToken)
	e.compose("Winter sale", "Everything 20% off, today only")
	e.waitFor(fmt.Sprintf("the live preview to count the %d eligible tokens", want), 20*time.Second,
		fmt.Sprintf(`%s.replace(/\D/g, '') === '%d'`, text("#preview-count"), want))
	e.waitFor("the phone preview to show the title and body", 10*time.Second,
		text("#phone-preview .phone-title")+` === 'Winter sale' && `+text("#phone-preview .phone-body")+` === 'Everything 20% off, today only'`)
	if unlabeled := eval[[]string](e, "looking for unlabelled inputs", `[...document.querySelectorAll('input, select, textarea')]
		.filter((el) => el.type !== 'hidden' && !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
		.map((el) => el.id || el.name || el.outerHTML.slice(0, 60))`); len(unlabeled) != 0 {
		t.Errorf("compose inputs without a label: %v", unlabeled)
	}
	if n := eval[int](e, "counting the sample", `document.querySelector('#preview-sample').textContent.split(/[^0-9]+/).filter(Boolean).length`); n != 10 {
		t.Errorf("preview sample shows %d user ids, want 10", n)
	}

	// A test send to users 1 and 2: one result row per token, in place.
	var testTokens int
	if err := e.db.Get(&testTokens, "SELECT COUNT(*) FROM device_tokens WHERE user_id IN (1, 2) AND invalidated_at IS NULL"); err != nil {
		t.Fatal(err)
	}
	e.setValue("#f-test-user_ids", "1, 2")
	e.click("#btn-test-send")
	e.waitFor(fmt.Sprintf("%d test-send result rows", testTokens), 20*time.Second,
		fmt.Sprintf(`document.querySelectorAll('#test-results tbody tr').length === %d`, testTokens))
	if ok := eval[int](e, "counting ok rows", `document.querySelectorAll('#test-results tbody tr[data-outcome="succeeded"]').length`); ok != testTokens {
		t.Fatalf("%d of %d test-send rows succeeded", ok, testTokens)
	}
	testSent := e.emu.Stats()
	if testSent.Requests != int64(testTokens) || e.broadcastCount() != 0 {
		t.Fatalf("after the test send: the emulator got %d requests (want %d), %d broadcasts stored (want 0)", testSent.Requests, testTokens, e.broadcastCount())
	}

	// Send, paced so that there is progress to watch.
	e.setValue("#f-max_rate", "400")
	e.send()
	e.page("watch")
	e.waitFor("the progress bar to move", 30*time.Second, `Number(document.querySelector('#count-succeeded').dataset.value) > 0`)
	e.shot("running")
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	st := e.emu.Stats()
	ok, dead := st.ByCode["OK"]-testSent.ByCode["OK"], st.ByCode["UNREGISTERED"]-testSent.ByCode["UNREGISTERED"]
	e.waitFor("the final counts on the page", 10*time.Second,
		fmt.Sprintf(`Number(document.querySelector('#count-succeeded').dataset.value) === %d && Number(document.querySelector('#count-failed').dataset.value) === %d`, ok, dead))
	if got := e.count("#count-targeted"); got != want || ok+dead != want || st.Requests-testSent.Requests != want {
		t.Fatalf("page: targeted %d; emulator: %d ok + %d UNREGISTERED in %d requests; want %d of each", got, ok, dead, st.Requests-testSent.Requests, want)
	}
	if dead == 0 {
		t.Fatal("no dead tokens were seeded: the failures part of the page is untested")
	}
	// Its users beside its devices, each user once (users_targeted).
	e.waitFor(fmt.Sprintf("%d users beside %d devices", wantUsers, want), 10*time.Second,
		fmt.Sprintf(`document.querySelector('#audience-size').dataset.users === '%d' && document.querySelector('#audience-size').dataset.devices === '%d'`, wantUsers, want))
	if wantUsers >= want {
		t.Fatalf("%d users on %d devices: users and devices are not told apart", wantUsers, want)
	}
	if n := eval[int64](e, "the error code row", `Number(document.querySelector('#error-codes tr[data-code="UNREGISTERED"]')?.textContent.replace(/\D/g, '') || -1)`); n != dead {
		t.Errorf("error codes row UNREGISTERED shows %d, want %d", n, dead)
	}
	// The failures table pages by keyset, 50 at a time, and filters by code.
	failRows := `document.querySelectorAll('#failures tbody tr[data-token]').length`
	e.waitFor("the first page of failures", 10*time.Second, fmt.Sprintf(`%s === %d`, failRows, min(dead, 50)))
	if dead > 50 {
		// A page read while the broadcast ran may have held its first 50
		// failures and no more: the list reloads after the last change
		// (at most 3 s on), and only then offers older ones.
		e.waitFor("older failures offered", 10*time.Second, `!document.querySelector('#failures-older').disabled`)
		e.click("#failures-older")
		e.waitFor("the older failures", 10*time.Second, fmt.Sprintf(`%s === %d`, failRows, dead-50))
		e.click("#failures-newest")
		e.waitFor("the newest failures again", 10*time.Second, fmt.Sprintf(`%s === 50`, failRows))
	}
	e.setValue("#failures-code", "UNREGISTERED")
	e.waitFor("the code filter", 10*time.Second, fmt.Sprintf(`%s === %d && [...document.querySelectorAll('#failures tbody tr[data-token] code')].every((c) => c.textContent === 'UNREGISTERED')`, failRows, min(dead, 50)))
	var b broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", e.watchedID()), nil, &b)
	if b.Succeeded != ok || b.Failed != dead {
		t.Fatalf("API: %+v; emulator %d ok, %d dead", b, ok, dead)
	}
	// Times are in the viewer's zone, with UTC on hover.
	if bad := eval[[]string](e, "checking the times", `[...document.querySelectorAll('time')].filter((el) => !el.dateTime || !/UTC/.test(el.title)).map((el) => el.outerHTML)`); len(bad) != 0 ||
		eval[int](e, "counting the times", `document.querySelectorAll('time').length`) == 0 {
		t.Errorf("time elements without a datetime and a UTC title (or none at all): %v", bad)
	}
	e.shot("")

	// Duplicate as new: compose, filled from this broadcast.
	id := e.watchedID()
	e.click("#btn-duplicate")
	e.page("compose")
	e.waitFor("the duplicated message", 10*time.Second, `document.querySelector('#f-title').value === 'Winter sale' && document.querySelector('#f-max_rate').value === '400'`)

	// A count of users that failed for good: the devices alone, "users
	// not counted" with its reason behind a click, never "being counted".
	if res, err := e.db.Exec("UPDATE broadcasts SET users_targeted = NULL, users_count_error = 'the count ran past its limit of 1m0s' WHERE id = ?", id); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("broadcast %d: %d rows updated", id, n)
	}
	// The server's read cache (PUSHFAN_BROADCAST_CACHE) answers the row
	// it read a moment ago: the page opens once the API has the change.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var raw map[string]any
		e.api("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &raw)
		if raw["users_count_error"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API still answers %v users, no failed count", raw["users_targeted"])
		}
		time.Sleep(50 * time.Millisecond) // polling the API, within the deadline above
	}
	e.route(fmt.Sprintf("#/broadcasts/%d", id))
	e.watching(id)
	e.waitFor("users not counted, with the reason", 10*time.Second,
		`!document.querySelector('#users-not-counted').hidden && document.querySelector('#audience-size').dataset.users === '' && `+
			text("#users-not-counted p")+`.includes('ran past its limit') && !`+text("#audience-size")+`.includes('being counted')`)
}

func TestConsoleCancelsARunningBroadcast(t *testing.T) {
	e := newEnv(t, 2000)
	want := e.eligibleTokens()
	e.signIn(senderToken)
	e.compose("Slow one", "paced at 50 a second")
	e.setValue("#f-max_rate", "50")
	e.send()
	e.page("watch")
	e.waitFor("the first sends", 30*time.Second, `Number(document.querySelector('#count-succeeded').dataset.value) >= 20`)
	e.click("#btn-cancel")
	e.waitFor("the confirm dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true`)
	e.click("#confirm-ok")
	e.waitFor("the broadcast to be canceled", 30*time.Second, text("#watch-status")+` === 'canceled'`)
	id := e.watchedID()
	var b broadcast
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.api("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
		if b.Succeeded+b.Failed+b.Canceled == b.Targeted || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := e.emu.Stats()
	if b.Status != "canceled" || b.Targeted != want || b.Canceled == 0 || b.Succeeded+b.Failed+b.Canceled != want || st.Requests != b.Succeeded+b.Failed {
		t.Fatalf("after cancel: %+v; emulator %d requests; want every one of %d targets counted once and the emulator to have got exactly the sent ones", b, st.Requests, want)
	}
	e.waitFor("the page to show the final split", 10*time.Second, fmt.Sprintf(
		`Number(document.querySelector('#count-canceled').dataset.value) === %d && Number(document.querySelector('#count-succeeded').dataset.value) === %d`, b.Canceled, b.Succeeded))
	if n := eval[int](e, "looking for the cancel button", `document.querySelectorAll('#btn-cancel').length`); n != 0 {
		t.Errorf("a canceled broadcast still offers Cancel")
	}
	e.shot("")
	e.fitsAPhone()
}

func TestConsoleViewerHasNoSendButtonAndIsRefused(t *testing.T) {
	e := newEnv(t, 50)
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Held", "body": "for approval", "audience": map[string]any{"all": true}, "hold": true}, &held); code != 202 && code != 200 {
		t.Fatalf("creating a held broadcast: %d", code)
	}
	e.signIn(viewerToken)
	if role := eval[string](e, "the role", `document.body.dataset.role`); role != "viewer" {
		t.Fatalf("body data-role %q", role)
	}
	if n := eval[int](e, "looking for Compose", `document.querySelectorAll('a[href="#/compose"]').length`); n != 0 {
		t.Fatal("a viewer is offered Compose")
	}
	e.route(fmt.Sprintf("#/broadcasts/%d", held.ID))
	e.page("watch")
	e.waitFor("the held status", 10*time.Second, text("#watch-status")+` === 'held'`)
	for _, b := range []string{"#btn-send", "#btn-cancel", "#btn-release", "#btn-resend", "#btn-duplicate", "#btn-test"} {
		if n := eval[int](e, "looking for "+b, fmt.Sprintf(`document.querySelectorAll(%q).length`, b)); n != 0 {
			t.Errorf("a viewer's page has %s", b)
		}
	}
	// Posting directly, with the session's own CSRF token, is refused.
	e.expectBrowserError("403")
	got := eval[string](e, "posting a release as the viewer", fmt.Sprintf(`(async () => {
		const s = await (await fetch('/console/api/session')).json();
		const r = await fetch('/push/broadcasts/%d/release', {method: 'POST', headers: {'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json'}, body: '{}'});
		return r.status + ' ' + (await r.json()).error.code;
	})()`, held.ID))
	if got != "403 forbidden" {
		t.Fatalf("viewer's direct release: %q, want 403 forbidden", got)
	}
	var b broadcast
	if e.api("GET", fmt.Sprintf("/push/broadcasts/%d", held.ID), nil, &b); b.Status != "held" || e.emu.Stats().Requests != 0 {
		t.Fatalf("after the viewer's post: %+v, %d requests sent", b, e.emu.Stats().Requests)
	}
	e.shot("")
}

// fieldErrorShown waits for a non-empty error matching errSel that the
// input marks invalid and names in aria-describedby.
func (e *env) fieldErrorShown(errSel, inputSel string) {
	e.t.Helper()
	e.waitFor(errSel+" next to "+inputSel, 20*time.Second, fmt.Sprintf(`(() => {
		const err = document.querySelector(%q), input = document.querySelector(%q);
		return !!err && !!input && err.textContent.trim() !== '' && input.getAttribute('aria-invalid') === 'true' &&
			(input.getAttribute('aria-describedby') || '').split(' ').includes(err.id) })()`, errSel, inputSel))
}

func TestConsoleShowsABadFieldNextToItsInput(t *testing.T) {
	e := newEnv(t, 20)
	e.signIn(senderToken)
	e.compose("Bad", "fields")
	if eval[bool](e, "looking for a category picker", `!!document.querySelector('#f-category')`) {
		t.Error("compose offers a category picker with no categories configured")
	}
	e.expectBrowserError("400")

	// A bad platform override: the error names a path inside apns.
	e.setValue("#f-apns", `{"headers": {"apns-priority": "7"}}`)
	e.send()
	e.fieldErrorShown(`.field-error[data-error-for^="apns."]`, "#f-apns")
	e.setValue("#f-apns", "")

	// A send time in the past.
	e.click(`input[name="delivery"][value="at"]`)
	e.setValue("#f-send_at", "2020-01-01T09:00")
	e.send()
	e.fieldErrorShown(`.field-error[data-error-for="send_at"]`, "#f-send_at")
	e.nothingStoredOrSent("the bad requests")
	e.shot("")
	e.fitsAPhone()
}

// fitsAPhone checks the page at a phone's width (375 px): nothing wider
// than the screen but the tables' own scrolling wrappers. It saves a
// screenshot "-phone".
func (e *env) fitsAPhone() {
	e.t.Helper()
	e.do("emulating a phone", 10*time.Second, chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	e.waitFor("the page to reflow to 375 px", 10*time.Second, `window.innerWidth === 375`)
	if w := eval[int](e, "measuring the page", `document.documentElement.scrollWidth`); w > 375 {
		e.t.Errorf("at 375 px the page is %d px wide", w)
	}
	e.shot("phone")
}

func TestConsoleRefusesAPostWithoutCSRF(t *testing.T) {
	e := newEnv(t, 20)
	e.signIn(senderToken)
	e.expectBrowserError("403")
	got := eval[string](e, "posting a broadcast with the cookie and no CSRF header", `(async () => {
		const r = await fetch('/push/broadcast?wait=0', {method: 'POST', headers: {'Content-Type': 'application/json'},
			body: JSON.stringify({title: 't', body: 'b', audience: {all: true}})});
		return r.status + ' ' + (await r.json()).error.code;
	})()`)
	if got != "403 csrf_failed" {
		t.Fatalf("a post without the CSRF token: %q, want 403 csrf_failed", got)
	}
	e.nothingStoredOrSent("the refused post")
	e.shot("")
}

func TestConsoleSignOutEndsTheSession(t *testing.T) {
	e := newEnv(t, 20)
	e.signIn(senderToken)
	if who := eval[string](e, "the header", text("#whoami")); who == "" {
		t.Fatal("the header does not say who is signed in")
	}
	e.click("#signout")
	e.page("signin")
	e.expectBrowserError("401")
	got := eval[string](e, "the session and an API call after sign-out", `(async () => {
		const s = await (await fetch('/console/api/session')).json();
		const r = await fetch('/push/stats');
		return s.signed_in + ' ' + r.status;
	})()`)
	if got != "false 401" {
		t.Fatalf("after sign-out: %q, want signed_in false and a 401", got)
	}
	var n int
	if err := e.db.Get(&n, "SELECT COUNT(*) FROM console_sessions"); err != nil || n != 0 {
		t.Fatalf("%d sessions left on the server (%v)", n, err)
	}
	e.shot("")
}

// TestConsoleReleasesAHeldBroadcastAndResendsItsFailures: a held
// broadcast is test-sent and released from its page, and its transient
// failures are resent from there to exactly the tokens that failed.
func TestConsoleReleasesAHeldBroadcastAndResendsItsFailures(t *testing.T) {
	// Two attempts with a short backoff keep the always-503 tokens quick
	// (a tuned test configuration: this measures nothing).
	e := newEnv(t, 60, "PUSHFAN_MAX_ATTEMPTS=2", "PUSHFAN_RETRY_BASE_DELAY=50ms")
	// Every 10th user's tokens answer UNAVAILABLE, always.
	if _, err := e.db.Exec(`UPDATE device_tokens SET token = CONCAT('unavailable-', token) WHERE user_id % 10 = 0`); err != nil {
		t.Fatal(err)
	}
	var unavailable int64
	if err := e.db.Get(&unavailable, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.token LIKE 'unavailable-%'`); err != nil || unavailable == 0 {
		t.Fatalf("%d always-unavailable tokens (%v)", unavailable, err)
	}
	want := e.eligibleTokens()
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Approve me", "body": "b", "audience": map[string]any{"all": true}, "hold": true}, &held); code != 202 && code != 200 {
		t.Fatalf("held: %d", code)
	}
	e.signIn(senderToken)
	e.route(fmt.Sprintf("#/broadcasts/%d", held.ID))
	e.page("watch")
	e.waitFor("the held status", 10*time.Second, text("#watch-status")+` === 'held'`)

	// A test send from the held broadcast's page.
	e.setValue("#watch-test-user_ids", "1")
	e.click("#btn-test")
	e.waitFor("the test-send result", 20*time.Second, `document.querySelectorAll('#test-results tbody tr[data-outcome="succeeded"]').length === 1`)
	testSent := e.emu.Stats().Requests

	e.click("#btn-release")
	e.waitFor("the confirm dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true`)
	e.click("#confirm-ok")
	e.waitFor("the released broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var b broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", held.ID), nil, &b)
	if b.Targeted != want || b.Errors["UNAVAILABLE"] != unavailable || b.Succeeded+b.Failed != want {
		t.Fatalf("released: %+v; want %d targets, all counted, %d of them UNAVAILABLE", b, want, unavailable)
	}
	e.waitFor("the page's failed count", 10*time.Second, fmt.Sprintf(`Number(document.querySelector('#count-failed').dataset.value) === %d`, b.Failed))

	// Resend to failed: the transient codes are ticked by default.
	before := e.emu.Stats().Requests
	e.click("#btn-resend")
	e.waitFor("the resend dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true && document.querySelector('#resend-code-UNAVAILABLE')?.checked === true`)
	e.click("#confirm-ok")
	e.waitFor("the resend's own page", 20*time.Second, fmt.Sprintf(`location.hash !== '#/broadcasts/%d' && document.body.dataset.page === 'watch'`, held.ID))
	e.waitFor("the resend to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var r broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", e.watchedID()), nil, &r)
	if r.ID == held.ID || r.Targeted != unavailable || r.Errors["UNAVAILABLE"] != unavailable {
		t.Fatalf("resend: %+v; want a new broadcast to the %d UNAVAILABLE tokens", r, unavailable)
	}
	// Two attempts per resent token, and the test send's one request before.
	if got := e.emu.Stats().Requests - before; got != 2*unavailable || testSent != 1 {
		t.Fatalf("the resend made %d requests, want 2 attempts × %d tokens (the test send made %d, want 1)", got, unavailable, testSent)
	}
	e.shot("")
}
