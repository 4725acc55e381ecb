package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// reviewOpen is true while the review before a send is shown.
const reviewOpen = `!!document.querySelector('dialog#review[open]')`

// send presses Send and goes through the review as an operator would:
// it types the device count the review asks for (a large audience) and
// confirms. A send the form or the API refuses before the review opens
// (a field error) is left there, for the test to look at.
func (e *env) send() {
	e.t.Helper()
	e.click("#btn-send")
	e.waitFor("the review, or an error", 30*time.Second,
		reviewOpen+` || !!document.querySelector('.field-error') || !document.querySelector('#form-error').hidden`)
	if !eval[bool](e, "looking for the review", reviewOpen) {
		return
	}
	if eval[bool](e, "looking for the typed confirmation", `!!document.querySelector('#review-type')`) {
		e.setValue("#review-type", eval[string](e, "reading the device count", `document.querySelector('#review-audience').dataset.devices`))
	}
	e.click("#review-confirm")
}

// A send to 1,000 devices or more is reviewed: the review counts users and
// devices, says when it goes, and its button stays disabled until the
// device count is typed. Going back sends nothing; confirming sends once,
// to exactly the audience.
func TestConsoleReviewBlocksALargeSendUntilConfirmed(t *testing.T) {
	e := newEnv(t, 1200)
	want := e.eligibleTokens()
	if want < 1000 {
		t.Fatalf("only %d eligible tokens: the review would not ask for the count", want)
	}
	e.signIn(senderToken)
	e.compose("Winter sale", "Everything 20% off, today only")
	e.waitFor("the preview to count devices and users", 20*time.Second,
		fmt.Sprintf(`%s.replace(/\D/g, '') === '%d' && %s.replace(/\D/g, '') === '%d'`, text("#preview-count"), want, text("#preview-users"), want))

	// Back: nothing is sent.
	e.click("#btn-send")
	e.waitFor("the review", 20*time.Second, reviewOpen)
	if got := eval[string](e, "the review's audience", `(() => { const p = document.querySelector('#review-audience');
		return p.dataset.users + ' ' + p.dataset.devices })()`); got != fmt.Sprintf("%d %d", want, want) {
		t.Fatalf("the review counts users and devices %q, want %d %d", got, want, want)
	}
	if got := eval[string](e, "the review's when", text("#review-when")); got != "Now" {
		t.Errorf("the review says it goes %q, want Now", got)
	}
	if got := eval[string](e, "the review's phone", text("#review-phone .phone-title")); got != "Winter sale" {
		t.Errorf("the review's phone shows the title %q", got)
	}
	e.shot("review")
	e.click("#review-back")
	e.waitFor("the review to close", 10*time.Second, `!`+reviewOpen+` && !document.querySelector('#review')`)
	if n := e.broadcastCount(); n != 0 || e.emu.Stats().Requests != 0 {
		t.Fatalf("going back stored %d broadcasts and sent %d messages", n, e.emu.Stats().Requests)
	}

	// Confirm: the button waits for the count.
	e.click("#btn-send")
	e.waitFor("the review again", 20*time.Second, reviewOpen)
	disabled := `document.querySelector('#review-confirm').disabled`
	if !eval[bool](e, "the confirm button", disabled) {
		t.Fatal("the confirm button of a large send is enabled before the count is typed")
	}
	for _, wrong := range []string{"12", fmt.Sprint(want - 1), "send it"} {
		e.setValue("#review-type", wrong)
		if !eval[bool](e, "the confirm button", disabled) {
			t.Fatalf("typing %q enabled the confirm button", wrong)
		}
	}
	// Pressing the disabled button sends nothing.
	eval[bool](e, "pressing the disabled button", `(document.querySelector('#review-confirm').click(), true)`)
	if n := e.broadcastCount(); n != 0 {
		t.Fatalf("a disabled confirm stored %d broadcasts", n)
	}
	// The count as people write it, with its separator.
	e.setValue("#review-type", fmt.Sprintf("%d,%03d", want/1000, want%1000))
	e.confirmAndWatch(want)
}

// A message without a title, a body longer than a phone shows and a link
// to another host are warned of in the form and listed in the review, and
// go all the same; what was typed survives a reload as a draft, which the
// send clears.
func TestConsoleWarnsAndKeepsADraft(t *testing.T) {
	e := newEnv(t, 20, "PUSHFAN_PUBLIC_URL=https://push.example.com")
	want := e.eligibleTokens()
	e.signIn(senderToken)
	e.route("#/compose")
	e.page("compose")
	long := strings.Repeat("Every word counts. ", 11) // 209 characters
	e.setValue("#f-body", long)
	e.click("#add-data")
	e.setValue(".data-key", "link")
	e.setValue(".data-value", "https://shop.example.org/sale")
	warned := func(what string) {
		e.t.Helper()
		e.waitFor("the warnings "+what, 10*time.Second, `['no-title', 'long-body', 'link-host'].every((w) => !!document.querySelector('#form-warnings:not([hidden]) [data-warning="' + w + '"]'))`)
	}
	warned("in the form")
	e.waitFor("the draft kept", 10*time.Second, `Object.keys(localStorage).some((k) => k.startsWith('pushfan.draft.') && localStorage.getItem(k).includes('shop.example.org'))`)

	// A reload keeps the draft, and says so.
	e.do("reloading", 30*time.Second, chromedp.Reload())
	e.page("compose")
	e.waitFor("the draft restored", 10*time.Second, fmt.Sprintf(`!document.querySelector('#draft-restored').hidden
		&& document.querySelector('#f-body').value === %q && document.querySelector('.data-value')?.value === 'https://shop.example.org/sale'`, long))
	warned("after the reload")

	// Mistakes are said in the operator's words, the engineer's text
	// behind a Details toggle: a JSON typo as it is typed, and a send time
	// past the schedule horizon as the server refuses it.
	e.setValue("#f-apns", `{"headers": `)
	e.waitFor("the JSON mistake in words", 10*time.Second, `(() => { const el = document.querySelector('.field-error[data-error-for="apns"]');
		return !!el && el.textContent.startsWith('This is not valid JSON') && !!el.querySelector('details summary') })()`)
	e.setValue("#f-apns", "")
	e.click(`input[name="audience-kind"][value="all"]`)
	e.expectBrowserError("400")
	e.click(`input[name="delivery"][value="at"]`)
	e.setValue("#f-send_at", "2099-01-01T09:00")
	e.send()
	e.waitFor("the horizon refusal in words", 20*time.Second, `(() => { const el = document.querySelector('.field-error[data-error-for="send_at"]');
		return !!el && el.textContent.startsWith('That time is too far ahead') && el.querySelector('details').textContent.includes('PUSHFAN_SCHEDULE_HORIZON') })()`)
	if n := e.broadcastCount(); n != 0 {
		t.Fatalf("a refused send stored %d broadcasts", n)
	}
	e.click(`input[name="delivery"][value="now"]`)

	// The review lists them; the send goes.
	e.click("#btn-send")
	e.waitFor("the review", 20*time.Second, reviewOpen)
	if got := eval[int](e, "the review's warnings", `document.querySelectorAll('#review-warnings [data-warning]').length`); got != 3 {
		t.Fatalf("the review lists %d warnings, want 3", got)
	}
	if eval[bool](e, "the review's typed confirmation", `!!document.querySelector('#review-type')`) {
		t.Fatalf("a send to %d devices asks for the count", want)
	}
	e.click("#review-confirm")
	e.page("watch")
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	if got := e.emu.Stats().Requests; got != want {
		t.Fatalf("the emulator got %d messages, want %d", got, want)
	}

	// Sent: the next compose starts empty.
	e.route("#/compose")
	e.page("compose")
	e.waitFor("an empty form", 10*time.Second, `document.querySelector('#f-body').value === '' && document.querySelector('#draft-restored').hidden`)
	e.checkConsole()
}

// templateConfig is a named audience of users 1 to 5 with a variable,
// nick, for a template's {{.nick}}.
const templateConfig = `
audiences:
  - name: first_five
    sql: |
      SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token, CONCAT('friend-', t.user_id) AS nick
      FROM device_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.user_id <= 5
      ORDER BY t.id LIMIT :limit
`

// A template saved from compose is listed, fills the form when used, and
// its variable is filled per user in what each phone received.
func TestConsoleTemplateIsSavedUsedAndFilledPerUser(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(templateConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 20, "PUSHFAN_CONFIG="+cfgPath)
	var tokens []struct {
		UserID uint64 `db:"user_id"`
		Token  string `db:"token"`
	}
	if err := e.db.Select(&tokens, `SELECT t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.user_id <= 5 ORDER BY t.id`); err != nil || len(tokens) == 0 {
		t.Fatalf("the audience's tokens: %v (%d)", err, len(tokens))
	}
	for _, tk := range tokens {
		e.emu.Online(tk.Token) // a watched phone: the emulator keeps what it gets
	}
	e.signIn(senderToken)
	e.compose("Hello {{.nick}}", "Your weekly picks are in")
	e.click("#tpl-save")
	e.setValue("#tpl-name", "weekly")
	e.click("#tpl-save-ok")
	e.waitFor("the template saved", 10*time.Second, `[...document.querySelectorAll('#tpl-use option')].some((o) => o.value === 'weekly')`)

	// Another visit: the list holds it, and using it fills the message.
	e.setValue("#f-title", "")
	e.setValue("#f-body", "")
	e.waitFor("the emptied draft dropped", 10*time.Second, `!Object.keys(localStorage).some((k) => k.startsWith('pushfan.draft.'))`)
	e.do("reloading", 30*time.Second, chromedp.Reload())
	e.page("compose")
	e.waitFor("the template listed", 10*time.Second, `[...document.querySelectorAll('#tpl-use option')].some((o) => o.value === 'weekly')`)
	if v := eval[string](e, "the title before", `document.querySelector('#f-title').value`); v != "" {
		t.Fatalf("the title is %q before the template is used", v)
	}
	e.setValue("#tpl-use", "weekly")
	e.waitFor("the message from the template", 10*time.Second,
		`document.querySelector('#f-title').value === 'Hello {{.nick}}' && document.querySelector('#f-body').value === 'Your weekly picks are in'`)
	e.setValue("#f-audience-name", "first_five")
	users := map[uint64]bool{}
	for _, tk := range tokens {
		users[tk.UserID] = true
	}
	e.waitFor("the named audience counted in devices and users", 20*time.Second,
		fmt.Sprintf(`%s === '%d' && %s === '%d'`, text("#preview-count"), len(tokens), text("#preview-users"), len(users)))
	e.send()
	e.page("watch")
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	if got := e.emu.Stats().Requests; got != int64(len(tokens)) {
		t.Fatalf("the emulator got %d messages, want %d", got, len(tokens))
	}
	for _, tk := range tokens {
		got := e.emu.Received(tk.Token)
		if want := fmt.Sprintf("Hello friend-%d", tk.UserID); len(got) != 1 || got[0].Title != want {
			t.Errorf("user %d's phone got %+v, want one message titled %q", tk.UserID, got, want)
		}
	}
	e.checkConsole()
}

// In Korean, compose and its review are in Korean with no key missing, and
// the Korean word shown (보내기) confirms a large send as SEND does.
func TestConsoleComposeReviewInKorean(t *testing.T) {
	e := newEnv(t, 1100)
	want := e.eligibleTokens()
	e.signIn(senderToken)
	eval[bool](e, "choosing Korean", `(localStorage.setItem('pushfan.lang', 'ko'), true)`)
	e.do("reloading in Korean", 30*time.Second, chromedp.Reload())
	e.page("dashboard")
	e.compose("겨울 세일", "오늘만 20% 할인")
	e.waitFor("the preview", 20*time.Second, fmt.Sprintf(`%s.replace(/\D/g, '') === '%d'`, text("#preview-count"), want))
	if got := eval[string](e, "the send button", text("#btn-send")); got != "보내기" {
		t.Errorf("the send button says %q in Korean", got)
	}
	e.click("#btn-send")
	e.waitFor("the review", 20*time.Second, reviewOpen)
	if got := eval[string](e, "the review's title", text("#review-title")); got != "보내기 전에 확인하세요" {
		t.Errorf("the review's title is %q in Korean", got)
	}
	e.setValue("#review-type", "보내기")
	e.waitFor("the Korean word to enable the button", 5*time.Second, `!document.querySelector('#review-confirm').disabled`)
	e.setValue("#review-type", "SEND")
	e.waitFor("SEND to enable it too", 5*time.Second, `!document.querySelector('#review-confirm').disabled`)
	e.click("#review-back")
	if missing := eval[[]string](e, "the missing keys", `window.pushfanMissingKeys`); len(missing) != 0 {
		t.Errorf("keys missing in Korean: %v", missing)
	}
	if n := e.broadcastCount(); n != 0 {
		t.Fatalf("going back stored %d broadcasts", n)
	}
	e.shot("ko")
	e.checkConsole()
}

// A review whose count fails (the server answers the preview 503, as an
// overloaded one would) still opens: the audience is "not counted", only
// typing the word confirms, and the send goes out once.
func TestConsoleReviewWithoutACountStillSends(t *testing.T) {
	e := newEnv(t, 30)
	want := e.eligibleTokens()
	e.signIn(senderToken)
	e.compose("Hello", "A count refused")
	eval[bool](e, "failing the previews from now on", `(() => {
		const real = window.fetch;
		window.fetch = (url, opts) => String(url).includes('/push/preview')
			? Promise.resolve(new Response('{"error":{"code":"unavailable","message":"the database is busy"}}', {status: 503, headers: {'Content-Type': 'application/json'}}))
			: real(url, opts);
		return true;
	})()`)
	e.click("#btn-send")
	e.waitFor("the review, uncounted", 30*time.Second, reviewOpen+` && !!document.querySelector('#review-uncounted')`)
	disabled := `document.querySelector('#review-confirm').disabled`
	if got := eval[string](e, "the confirm button's words", text("#review-confirm")); got != "Send" {
		t.Errorf("the confirm button of an uncounted send reads %q, want Send", got)
	}
	e.setValue("#review-type", fmt.Sprint(want))
	if !eval[bool](e, "the confirm button", disabled) {
		t.Fatal("a number confirmed a send whose count is unknown")
	}
	e.setValue("#review-type", "SEND")
	e.confirmAndWatch(want)
}

// confirmAndWatch confirms the review once its typing has enabled the
// button, follows the broadcast to its end, and checks it was stored once
// and sent to want devices.
func (e *env) confirmAndWatch(want int64) {
	e.t.Helper()
	e.waitFor("the confirm button to enable", 5*time.Second, `!document.querySelector('#review-confirm').disabled`)
	e.click("#review-confirm")
	e.page("watch")
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	if n, got := e.broadcastCount(), e.emu.Stats().Requests; n != 1 || got != want {
		e.t.Fatalf("after one confirmed send: %d broadcasts stored, %d messages sent; want 1 and %d", n, got, want)
	}
	e.checkConsole()
}
