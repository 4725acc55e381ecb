package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// shotName is a page's screenshot name: "#/segments/_new" → "segments-_new",
// "#/" → "dashboard".
func shotName(hash string) string {
	if hash == "#/" {
		return "dashboard"
	}
	return strings.NewReplacer("#/", "", "/", "-", "?", "-", "=", "-").Replace(hash)
}

// englishUIWords are words of the console's English that must not be
// seen on a Korean page, matched as whole words in the case the console
// writes them ("Webhooks" the heading, not "webhooks:" the config key a
// hint names).
var englishUIWords = []string{
	"Send", "Sending", "Cancel", "Loading", "Broadcast", "Broadcasts", "Sign", "Save", "Delete",
	"User", "Users", "Segment", "Segments", "Audience", "Audiences", "Compose", "Dashboard",
	"Cluster", "Webhook", "Webhooks", "Keys", "Activity", "Filter", "Status", "Trigger", "Title",
	"Created", "Name", "Version", "Versions", "Description", "Updated", "Older", "Newer", "Newest",
	"Edit", "Show", "Remove", "Count", "Counting", "Choose", "Enter", "Copy", "Revoke", "Members",
	"Limit", "Paused", "Instance", "Failed", "Succeeded", "Targeted", "Role", "Expires", "Apps",
	"Event", "Health", "Endpoint", "Endpoints", "Deliveries", "When", "Actor", "Action", "Target",
	"Request", "Outcome", "Opened", "Clicked", "Device", "More", "Look", "Parameter", "Type",
	"Named", "Built", "Language", "Audit", "Budget", "Running", "Template", "details",
	"never", "none", "devices", "device", "users", "completed", "scheduled", "running", "queued",
	"canceled", "failed", "held", "healthy", "failing", "disabled", "active", "revoked", "expired",
	"viewer", "sender", "approver", "admin", "current",
	// The API's enum values, when printed as text: a class, a trigger, a
	// status, an outcome, a platform that is a word, an actor's kind, a
	// webhook delivery's status.
	"transactional", "bulk", "paced", "api", "schedule", "resend", "planning", "paused", "accepted", "capped",
	"deferred", "stale", "excluded", "succeeded", "web", "token", "person", "pending", "delivered", "gone",
}

// apiEnumValues are values the API sends that the console must put in
// words: on a Korean page an element whose whole text is one of them is
// English, even inside <code> or data-raw (where names and ids are left
// alone). The raw value may stay on hover (title) or in a closed
// "details". "cron" is here and not above: Korean text names cron
// expressions.
var apiEnumValues = []string{
	"transactional", "bulk", "api", "schedule", "cron", "resend",
	"held", "scheduled", "planning", "queued", "running", "completed", "canceled", "failed", "paused",
	"accepted", "capped", "deferred", "stale", "excluded", "succeeded", "web",
	"viewer", "sender", "approver", "admin", "token", "key", "person",
	"pending", "delivered", "gone", "expired",
	"broadcast.create", "broadcast.cancel", "broadcast.release", "broadcast.release.refused", "broadcast.resend",
	"broadcast.edit", "testsend", "segment.create", "segment.update", "segment.delete", "consent.update",
	"audiences.reload", "webhook.redeliver", "webhook.enable", "job.fire", "job.run", "job.pause", "job.resume",
	"key.create", "key.revoke", "template.create", "template.update", "template.delete", "signin", "signin.failed", "signout",
	"broadcast.started", "broadcast.held", "broadcast.finished", "tokens.invalidated", "broadcast.engagement",
}

// visibleEnglish returns the visible texts on the page (text nodes with a
// box, the placeholders and aria-labels of what is on screen) that hold a
// word of englishUIWords, leaving out what the user typed or the server
// answered: <code>, <pre>, <time>, inputs' values and anything marked
// data-raw (names, ids, tokens, codes, server messages). A text that is
// wholly an API enum value (apiEnumValues) is English wherever it is: an
// enum value is the API's word, not data.
const visibleEnglishJS = `((words, enums) => {
	const stop = new Set(words);
	const enumSet = new Set(enums);
	const raw = (el) => !!el.closest('code, pre, time, [data-raw], script, style, noscript, title');
	const hits = [];
	const check = (text, where) => {
		if (enumSet.has(String(text).trim())) { hits.push(where + ': ' + JSON.stringify(String(text).trim()) + ' is a raw API value'); return; }
		for (const w of String(text).split(/[^A-Za-z-]+/)) {
			if (stop.has(w)) { hits.push(where + ': ' + JSON.stringify(String(text).trim()) + ' has ' + w); return; }
		}
	};
	const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = walker.nextNode(); n; n = walker.nextNode()) {
		const el = n.parentElement;
		if (!el || el.closest('script, style, noscript, title') || !n.textContent.trim()) continue;
		// Rendered only: a closed <details>'s body, a hidden element and an
		// <option> of a closed list have no box (the chosen option shows as
		// the select's value, checked below).
		if (el.tagName !== 'OPTION' && el.getClientRects().length === 0) continue;
		if (el.tagName === 'OPTION' && el.parentElement.closest('select')?.getClientRects().length === 0) continue;
		const where = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
		if (raw(el)) {
			if (enumSet.has(n.textContent.trim())) hits.push(where + ': ' + JSON.stringify(n.textContent.trim()) + ' is a raw API value');
			continue;
		}
		check(n.textContent, where);
	}
	for (const el of document.querySelectorAll('[placeholder], [aria-label]')) {
		if (raw(el) || el.getClientRects().length === 0) continue;
		for (const a of ['placeholder', 'aria-label']) if (el.hasAttribute(a)) check(el.getAttribute(a), el.tagName.toLowerCase() + '[' + a + ']');
	}
	return hits;
})`

// TestConsoleSpeaksEnglishAndKorean visits every page of the console as
// an admin in each language: no key is missing from the catalog, <html
// lang> names the language, and a Korean page shows no English UI word
// (outside the pages still being translated).
func TestConsoleSpeaksEnglishAndKorean(t *testing.T) {
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hooks.Close)
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	cfg := pagesConfig + fmt.Sprintf("webhooks:\n  - name: app\n    url: %s/hooks\n    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", hooks.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 20, "PUSHFAN_CONFIG="+cfgPath, "PUSHFAN_WEBHOOK_ALLOW_PRIVATE=true")
	var b broadcast
	if code := e.api("POST", "/push/broadcast", map[string]any{"title": "Hola", "body": "b", "audience": map[string]any{"user_ids": []int{1, 2}}}, &b); code != http.StatusOK || b.Status != "completed" {
		t.Fatalf("broadcast: %d %+v", code, b)
	}
	if code := e.api("POST", "/push/segments", map[string]any{"name": "android-folk", "description": "android folk",
		"filter": map[string]any{"and": []any{
			map[string]any{"field": "platform", "op": "eq", "value": "android"},
			map[string]any{"field": "last_seen", "op": "within", "value": "30d"},
		}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating a segment: %d", code)
	}
	if code := e.api("POST", "/push/keys", map[string]any{"name": "nightly", "role": "viewer"}, nil); code != http.StatusCreated {
		t.Fatalf("creating a key: %d", code)
	}
	// A user's lookup and the cluster refresh on their own; the webhook's
	// finished event is delivered by then, or waiting: either is shown.
	pages := []struct{ hash, page string }{
		{"#/", "dashboard"},
		{"#/broadcasts", "broadcasts"},
		{fmt.Sprintf("#/broadcasts/%d", b.ID), "watch"},
		{"#/compose", "compose"},
		{"#/cron", "cron"},
		{"#/segments", "segments"},
		{"#/segments/android-folk", "segment"},
		{"#/segments/_new", "segment-builder"},
		{"#/segments/android-folk/edit", "segment-builder"},
		{"#/audiences", "audiences"},
		{"#/users?id=1", "users"},
		{"#/cluster", "cluster"},
		{"#/webhooks", "webhooks"},
		{"#/webhooks/app", "webhooks"},
		{"#/keys", "keys"},
		{"#/activity", "activity"},
		{"#/campaigns", "campaigns"},
	}
	e.signIn(senderToken)
	for _, lang := range []string{"en", "ko"} {
		e.route("#/")
		e.page("dashboard")
		e.reloading("choosing "+lang, func() {
			eval[bool](e, "choosing "+lang, fmt.Sprintf(`(localStorage.setItem('pushfan.lang', %q), location.reload(), true)`, lang))
		})
		for _, p := range pages {
			e.route(p.hash)
			e.page(p.page)
			e.waitFor(p.hash+" to finish loading", 20*time.Second, `!document.querySelector('[aria-busy="true"]')`)
			if p.page == "users" {
				e.waitFor("the user's deliveries", 20*time.Second, `!!document.querySelector('#user-deliveries-table')`)
			}
			if p.page == "segment-builder" {
				e.waitFor("the builder's count", 20*time.Second, `['exact', 'idle'].includes(document.querySelector('#seg-count')?.dataset.state)`)
			}
			e.checkLanguage(lang, p.hash, p.page)
			// Each page in each language: `make console-shots` copies these
			// into docs/console/<page>.<lang>.png.
			e.shot(lang + "-" + shotName(p.hash))
			// What a page says when asked or refused, in the language too.
			switch p.hash {
			case "#/keys":
				e.click("#keys-table .revoke")
				e.waitFor("the revoke confirmation", 10*time.Second, `document.querySelector('#confirm').open`)
				e.checkLanguage(lang, p.hash+" (confirming)", p.page)
				e.click("#confirm-cancel")
				e.waitFor("the confirmation closed", 10*time.Second, `!document.querySelector('#confirm').open`)
			case "#/segments/_new":
				e.click("#seg-save")
				e.waitFor("the builder's errors", 10*time.Second, `document.querySelectorAll('.field-error').length >= 2`)
				e.checkLanguage(lang, p.hash+" (refused)", p.page)
			}
		}
		// Signed out: the sign-in page.
		e.click("#signout")
		e.page("signin")
		e.checkLanguage(lang, "#/signin", "signin")
		e.shot(lang + "-signin")
		e.do("signing in again", 20*time.Second, chromedp.SendKeys(chromedp.CSS("#signin-token"), senderToken+"\r"))
		e.page("dashboard")
	}
}

// checkLanguage asserts the page on screen speaks lang: no key missing
// from its catalog, <html lang>, and for Korean no English UI word.
func (e *env) checkLanguage(lang, hash, page string) {
	e.t.Helper()
	if missing := eval[[]string](e, "the missing keys", `window.pushfanMissingKeys`); len(missing) != 0 {
		e.t.Errorf("%s (%s): keys missing from the catalog: %v", hash, lang, missing)
	}
	if got := eval[string](e, "<html lang>", `document.documentElement.lang`); got != lang {
		e.t.Errorf("%s: <html lang=%q>, want %q", hash, got, lang)
	}
	if lang != "ko" {
		return
	}
	js := fmt.Sprintf("%s(%s, %s)", visibleEnglishJS, jsStrings(englishUIWords), jsStrings(apiEnumValues))
	if hits := eval[[]string](e, "looking for English on "+hash, js); len(hits) != 0 {
		e.shot("english-on-" + page)
		e.t.Errorf("%s in Korean shows English:\n  %s", hash, strings.Join(hits, "\n  "))
	}
}

func jsStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// TestConsoleLanguageSwitcher: the browser's language chooses first
// (Korean from Accept-Language); the switcher then changes the nav's
// words, the page's <html lang> and how numbers are written, and back.
func TestConsoleLanguageSwitcher(t *testing.T) {
	e := newEnv(t, 5)
	// The sign-in page says where a token is (issue 46, item 12).
	e.do("opening the console", 30*time.Second, chromedp.Navigate(e.url+"/"))
	e.page("signin")
	where := eval[string](e, "where the token is", `document.querySelector('#signin-where')?.innerText ?? ''`)
	e.shot("signin")
	for _, w := range []string{"make run", ".run/admin-token", "PUSHFAN_ADMIN_TOKENS", "API key"} {
		if !strings.Contains(where, w) {
			t.Errorf("the sign-in page's hint %q does not name %q", where, w)
		}
	}
	e.do("signing in", 20*time.Second, chromedp.SendKeys(chromedp.CSS("#signin-token"), senderToken+"\r"))
	e.page("dashboard")
	// No webhook configured: the page says what they are for and offers
	// the next step, not an empty table.
	e.route("#/webhooks")
	e.page("webhooks")
	e.shot("webhooks-empty")
	if got := eval[string](e, "the webhooks' empty state", `[...document.querySelectorAll('#webhooks-empty, #webhooks-add-first, #webhooks-example, #webhooks-table')].map((el) => el.id).join(',')`); got != "webhooks-empty,webhooks-example,webhooks-add-first" {
		t.Errorf("the webhooks page without an endpoint shows %q, want the empty state with its example and button", got)
	}
	e.route("#/")
	e.page("dashboard")
	// compactNum is format.js's: the same module the page uses, so it
	// formats in the language the page chose.
	const compact = `import(new URL('./format.js', document.baseURI).href).then((m) => m.compactNum(1234567))`
	const nav = `document.querySelector('#nav a[href="#/broadcasts"]')?.textContent`
	if got := eval[string](e, "the English nav", nav); got != "Broadcasts" {
		t.Fatalf("the nav reads %q in an en-US browser, want Broadcasts", got)
	}
	if got := eval[string](e, "an English number", compact); got != "1.2M" {
		t.Errorf("1234567 compact in English is %q, want 1.2M", got)
	}

	// A browser that asks for Korean first, nothing chosen yet.
	ua := eval[string](e, "the user agent", `navigator.userAgent`)
	e.do("asking for Korean", 20*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: "ko-KR,ko;q=0.9,en;q=0.5"})
		return err
	}))
	e.reloading("reloading", func() { eval[bool](e, "reloading", `(location.reload(), true)`) })
	e.waitFor("Korean from the browser", 20*time.Second, `document.documentElement.lang === 'ko'`)
	if got := eval[string](e, "the Korean nav", nav); got != "발송 목록" {
		t.Errorf("the nav reads %q for a Korean browser, want 발송 목록", got)
	}

	// The switcher: English, then Korean again.
	for _, step := range []struct{ lang, nav, number string }{
		{"en", "Broadcasts", "1.2M"},
		{"ko", "발송 목록", "123.5만"},
	} {
		e.reloading("switching to "+step.lang, func() { e.setValue("#lang-switcher", step.lang) })
		e.waitFor("the page in "+step.lang, 20*time.Second, fmt.Sprintf(`document.documentElement.lang === %q && %s === %q`, step.lang, nav, step.nav))
		if got := eval[string](e, "the chosen language", `localStorage.getItem('pushfan.lang')`); got != step.lang {
			t.Errorf("localStorage keeps %q, want %q", got, step.lang)
		}
		if got := eval[string](e, "a number", compact); got != step.number {
			t.Errorf("1234567 compact in %s is %q, want %q", step.lang, got, step.number)
		}
		if got := eval[string](e, "the switcher", `document.querySelector('#lang-switcher').value`); got != step.lang {
			t.Errorf("the switcher shows %q, want %q", got, step.lang)
		}
		// Another page keeps the language.
		e.route("#/broadcasts")
		e.page("broadcasts")
		if got := eval[string](e, "the sign-out button", `document.querySelector('#signout').textContent`); got != map[string]string{"en": "Sign out", "ko": "로그아웃"}[step.lang] {
			t.Errorf("the sign-out button reads %q in %s", got, step.lang)
		}
		e.route("#/")
		e.page("dashboard")
	}
	// Back to English for what follows in this browser.
	e.reloading("switching back", func() { e.setValue("#lang-switcher", "en") })
	e.waitFor("English again", 20*time.Second, `document.documentElement.lang === 'en' && document.querySelector('#signout')?.textContent === 'Sign out'`)
}

// reloading runs act, which reloads the page, and waits until the new
// page has shown the dashboard. A mark on the old window tells the two
// apart; the evaluations that meet the reload midway are retried.
func (e *env) reloading(what string, act func()) {
	e.t.Helper()
	eval[bool](e, "marking the page", `(window.pushfanBeforeReload = true)`)
	act()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.pushfanBeforeReload && document.body.dataset.page === 'dashboard'`))
		cancel()
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			e.shot("failed")
			e.t.Fatalf("%s: the page did not reload to the dashboard within 30 s (last error %v)", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
