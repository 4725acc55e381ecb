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

// A scheduled broadcast's page says when it goes at the top (the time in
// the viewer's zone and in UTC, and how long until then), shows no result
// before it has run, and its Edit changes the message and the time: the
// phone gets the new title, once, at the new time, not the old one.
func TestEditScheduledBroadcastGoesOutEdited(t *testing.T) {
	e := newEnv(t, 5)
	var token string
	if err := e.db.Get(&token, "SELECT token FROM device_tokens WHERE user_id = 1 AND invalidated_at IS NULL ORDER BY id LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	e.emu.Online(token) // watched: the emulator keeps what this phone gets
	old := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	var b scheduledBroadcast
	if code := e.api("POST", "/push/broadcast", map[string]any{"title": "Old title", "body": "b", "dry_run": false,
		"audience": map[string]any{"user_ids": []int{1}}, "send_at": old.Format(time.RFC3339)}, &b); code != 202 && code != 200 || b.Status != "scheduled" {
		t.Fatalf("scheduling: %d %+v", code, b)
	}
	e.signIn(senderToken)
	e.route(fmt.Sprintf("#/broadcasts/%d", b.ID))
	e.page("watch")
	e.waitFor("when it goes, at the top", 20*time.Second, `(() => { const c = document.querySelector('#schedule-card');
		return c && !c.hidden && /in 1 h 5\d min|in 2 h 0 min/.test(c.textContent) && document.querySelector('#schedule-utc').textContent.includes('UTC') })()`)
	if !eval[bool](e, "the card's place", `(document.querySelector('#schedule-card').compareDocumentPosition(document.querySelector('#progress')) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0`) {
		t.Fatal("the send time is not above the progress")
	}
	if eval[bool](e, "result cards", `!document.querySelector('section[aria-labelledby="failures-h"]').hidden || !document.querySelector('section[aria-labelledby="rate-h"]').hidden`) {
		t.Fatal("a broadcast that has not run shows result cards")
	}
	e.shot("scheduled")

	e.click("#btn-edit")
	e.setValue("#edit-title", "New title")
	// 20 s ahead, in the browser's zone, as a person picks it.
	eval[bool](e, "picking the new time", `(() => { const d = new Date(Date.now() + 20000); const p = (n) => String(n).padStart(2, '0');
		const el = document.querySelector('#edit-send-at');
		el.value = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
		el.dispatchEvent(new Event('input', {bubbles: true})); return true })()`)
	e.click("#btn-edit-save")
	e.waitFor("the edited message and time", 20*time.Second, `(() => { const c = document.querySelector('#schedule-card');
		return !document.querySelector('#edit-form') && /in (less than a minute|1 min)/.test(c.textContent) && document.querySelector('main').textContent.includes('New title') })()`)
	var edited scheduledBroadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &edited)
	if edited.SendAt == nil || !edited.SendAt.Before(old.Add(-time.Hour)) || edited.Message.Title != "New title" {
		t.Fatalf("after the edit: %+v", edited)
	}

	e.waitFor("the broadcast to finish at its new time", 120*time.Second, `document.querySelector('#watch-status')?.textContent === 'completed'`)
	got := e.emu.Received(token)
	if len(got) != 1 || got[0].Title != "New title" {
		t.Fatalf("the phone got %+v, want one message titled New title", got)
	}
	var started time.Time
	if err := e.db.Get(&started, "SELECT started_at FROM broadcasts WHERE id = ?", b.ID); err != nil {
		t.Fatal(err)
	}
	if started.Before(edited.SendAt.Add(-time.Second)) {
		t.Fatalf("started at %v, before its new send time %v", started, edited.SendAt)
	}
	var audited int
	if err := e.db.Get(&audited, "SELECT COUNT(*) FROM audit_entries WHERE action = 'broadcast.edit' AND target = ?", fmt.Sprintf("broadcast:%d", b.ID)); err != nil || audited != 1 {
		t.Fatalf("%d broadcast.edit entries (%v), want 1", audited, err)
	}
	if eval[bool](e, "the card after the run", `!document.querySelector('#schedule-card').hidden`) {
		t.Fatal("the schedule card stays after the broadcast ran")
	}
}

// scheduledBroadcast is what the edit test reads of a broadcast.
type scheduledBroadcast struct {
	ID      uint64     `json:"id"`
	Status  string     `json:"status"`
	SendAt  *time.Time `json:"send_at"`
	Message struct {
		Title string `json:"title"`
	} `json:"message"`
}

const cronControlConfig = lowIDsAudience + `jobs:
  - name: morning_digest
    schedule: "0 0 9 * * *"
    timezone: Asia/Seoul
    audience:
      name: low_ids
      params: {max_user: 5}
    message:
      title: Good morning
      body: Your digest
  - name: ticker
    schedule: "*/2 * * * * *"
    timezone: UTC
    audience: {all: true}
    message:
      title: Tick
`

// The Cron page in words, and an admin's controls: a paused job stops
// firing (its fires recorded skipped) and says so; run now, clicked
// twice, makes one broadcast of the job, linked from the page.
func TestCronPauseAndRunNow(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(cronControlConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 8, "PUSHFAN_CONFIG="+cfgPath)
	e.signIn(senderToken)
	e.route("#/cron")
	e.page("cron")
	row := func(job string) string {
		return fmt.Sprintf(`document.querySelector('#cron-jobs tr[data-job=%q]')`, job)
	}
	e.waitFor("the jobs in words", 20*time.Second, row("morning_digest")+`?.textContent.includes('every day at 09:00') && `+
		row("morning_digest")+`.textContent.includes('Audience low_ids (max_user = 5)') && `+row("morning_digest")+`.textContent.includes('Good morning') && `+
		row("morning_digest")+`.querySelector('.job-next').textContent.includes('in Asia/Seoul') && `+
		row("ticker")+`?.textContent.includes('every 2 seconds') && `+row("ticker")+`.textContent.includes('All users')`)
	if txt := eval[string](e, "the page", `document.querySelector('main').textContent`); strings.Contains(txt, `{"all"`) || strings.Contains(txt, `"name"`) {
		t.Fatalf("raw JSON on the cron page: %s", txt)
	}

	count := func(q string) int {
		t.Helper()
		var n int
		if err := e.db.Get(&n, q); err != nil {
			t.Fatal(err)
		}
		return n
	}
	made := func() int { return count("SELECT COUNT(*) FROM broadcasts WHERE job_name = 'ticker'") }
	deadline := time.Now().Add(30 * time.Second)
	for made() == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if made() == 0 {
		t.Fatal("the ticker never fired")
	}
	e.click(`#cron-jobs tr[data-job="ticker"] [data-action="job-pause"]`)
	e.waitFor("the ticker paused", 20*time.Second, row("ticker")+`.dataset.paused === 'true' && `+row("ticker")+`.textContent.includes('Paused') && document.querySelector('#cron-notice').textContent.includes('paused on every server')`)
	skipped := func() int {
		return count("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = 'ticker' AND reason = 'paused'")
	}
	waitDB := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitDB("a paused fire skipped", func() bool { return skipped() >= 1 })
	before, skips := made(), skipped()
	waitDB("two more paused fires skipped", func() bool { return skipped() >= skips+2 })
	if after := made(); after != before {
		t.Fatalf("the paused ticker made %d broadcasts", after-before)
	}
	e.shot("paused")

	runOnce := func() (link string, replayed bool) {
		e.click(`#cron-jobs tr[data-job="morning_digest"] [data-action="job-run"]`)
		e.waitFor("the run-now confirmation", 10*time.Second, `document.querySelector('#confirm').open && document.querySelector('#confirm-body').textContent.includes('Audience low_ids (max_user = 5)')`)
		eval[bool](e, "clearing the notice", `(document.querySelector('#cron-notice').hidden = true, true)`)
		e.click("#confirm-ok")
		e.waitFor("the run's link", 20*time.Second, `!document.querySelector('#cron-notice').hidden && !!document.querySelector('#cron-run-link')`)
		return eval[string](e, "the run's link", `document.querySelector('#cron-run-link').getAttribute('href')`),
			eval[bool](e, "whether it ran already", `document.querySelector('#cron-notice [data-replayed]').dataset.replayed === 'true'`)
	}
	first, firstReplayed := runOnce()
	second, secondReplayed := runOnce()
	var runs, fires int
	runs = count("SELECT COUNT(*) FROM broadcasts WHERE job_name = 'morning_digest'")
	fires = count("SELECT COUNT(DISTINCT fire_time) FROM broadcasts WHERE job_name = 'morning_digest'")
	// Two clicks in one minute are one broadcast; across a minute's turn,
	// one a minute.
	if runs != fires || (fires == 1 && first != second) || runs < 1 || runs > 2 {
		t.Fatalf("two clicks: links %s and %s, %d broadcasts of %d fire times", first, second, runs, fires)
	}
	// The second click of a minute says nothing new was sent.
	if firstReplayed || secondReplayed != (first == second) {
		t.Fatalf("run now said replayed %v then %v for links %s and %s", firstReplayed, secondReplayed, first, second)
	}
	e.click(`#cron-jobs tr[data-job="ticker"] [data-action="job-resume"]`)
	e.waitFor("the ticker resumed", 20*time.Second, row("ticker")+`.dataset.paused === 'false'`)
	waitDB("a fire after the resume", func() bool { return made() > before })

	// In Korean, the schedule is in words too.
	eval[bool](e, "switching to Korean", `(localStorage.setItem('pushfan.lang', 'ko'), true)`)
	e.do("reopening the cron page", 30*time.Second, chromedp.Navigate(e.url+"/console/?ko#/cron"))
	e.page("cron")
	e.waitFor("the schedule in Korean", 20*time.Second, row("morning_digest")+`?.textContent.includes('매일 09:00') && `+row("morning_digest")+`.textContent.includes('대상 그룹 low_ids')`)
}
