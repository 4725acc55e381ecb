package console_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The broadcast page's cards agree and its rate is never missing, and the
// dashboard draws reach as reach:
//   - with nothing sent, the dashboard's charts give way to an empty state;
//   - a finished short broadcast shows its average rate (a number, not
//     "No samples yet");
//   - while a paced broadcast runs, Engagement's "Accepted by FCM" equals
//     Progress's "Succeeded" every time both are read;
//   - the paced broadcast, reopened once finished, draws its chart;
//   - a broadcast canceled early is a bar as tall as its reach, not a
//     full green one, and its tooltip names both its reach and its
//     success rate.
func TestConsoleWatchCardsAgreeAndRatesShow(t *testing.T) {
	e := newEnv(t, 700)
	e.signIn(senderToken)
	e.page("dashboard")
	e.waitFor("the charts' empty state", 10*time.Second, `!!document.querySelector('#charts-empty') && !document.querySelector('#reach-chart')`)

	// A short broadcast: twenty users.
	ids := make([]int, 20)
	for i := range ids {
		ids[i] = i + 1
	}
	var short broadcast
	if code := e.api("POST", "/push/broadcast", map[string]any{"audience": map[string]any{"user_ids": ids}, "title": "Short"}, &short); code != http.StatusOK || short.Status != "completed" {
		t.Fatalf("the short broadcast: %d %+v", code, short)
	}
	var shortFull struct {
		Succeeded, Failed int64
		DurationMS        *int64 `json:"duration_ms"`
	}
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", short.ID), nil, &shortFull)
	if shortFull.DurationMS == nil || *shortFull.DurationMS <= 0 {
		t.Fatalf("the short broadcast has no duration: %+v", shortFull)
	}
	e.route(fmt.Sprintf("#/broadcasts/%d", short.ID))
	e.watching(short.ID)
	e.waitFor("the short broadcast's average rate", 20*time.Second, `document.querySelector('#rate-average')?.hidden === false && Number(document.querySelector('#rate-average').dataset.value) > 0`)
	want := float64(shortFull.Succeeded+shortFull.Failed) / (float64(*shortFull.DurationMS) / 1000)
	if got := eval[float64](e, "reading the average", `Number(document.querySelector('#rate-average').dataset.value)`); math.Abs(got-want) > want*1e-9 {
		t.Errorf("average shown %v/s, want %v/s (%d sends in %d ms)", got, want, shortFull.Succeeded+shortFull.Failed, *shortFull.DurationMS)
	}
	if eval[bool](e, "looking for 'No samples yet'", `document.querySelector('#rate-chart').textContent.includes('No samples yet')`) {
		t.Errorf("a finished broadcast says No samples yet")
	}

	// A paced one: 50 a second, some 13 s.
	var paced broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"audience": map[string]any{"all": true}, "title": "Paced", "max_rate": 50}, &paced); code != http.StatusAccepted {
		t.Fatalf("the paced broadcast: %d %+v", code, paced)
	}
	e.route(fmt.Sprintf("#/broadcasts/%d", paced.ID))
	e.watching(paced.ID)
	samples, midRun := 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pair := eval[[]string](e, "reading both cards", `[document.querySelector('#count-succeeded')?.dataset.value ?? 'none', document.querySelector('#funnel-accepted')?.dataset.value ?? 'none', document.querySelector('#watch-status').className]`)
		if pair[0] != pair[1] {
			e.shot("disagree")
			t.Fatalf("Progress says %s succeeded, Engagement %s accepted by FCM", pair[0], pair[1])
		}
		samples++
		if pair[0] != "0" && pair[2] == "badge badge-running" {
			midRun++
		}
		if pair[2] == "badge badge-completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paced broadcast did not finish in 3 minutes (%d samples)", samples)
		}
		time.Sleep(700 * time.Millisecond)
	}
	if midRun < 3 {
		t.Fatalf("only %d of %d samples were taken while it ran with sends made: the test proves nothing", midRun, samples)
	}

	// Reopened once finished: its whole run is drawn.
	e.route("#/broadcasts")
	e.page("broadcasts")
	e.route(fmt.Sprintf("#/broadcasts/%d", paced.ID))
	e.watching(paced.ID)
	e.waitFor("the reopened paced broadcast's chart", 20*time.Second, `document.querySelectorAll('#rate-chart path.line').length === 1`)

	// Its failures: explained, exported, and one user's devices looked
	// up (user 40's token is one of the dead ones; user 20's died in the
	// short broadcast, before this one).
	e.waitFor("the failures explained and their export", 10*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#failures tbody tr[data-token]')];
		const csv = document.querySelector('#btn-failures-csv');
		return rows.length > 0 && rows.every((r) => r.dataset.code === 'UNREGISTERED' && r.querySelector('.code-words').textContent.includes('no longer registered'))
			&& !csv.hidden && csv.getAttribute('href').endsWith('/outcomes?outcome=failed&format=csv');
	})()`)
	e.setValue("#failures-user", "40")
	e.click("#btn-failures-user")
	e.waitFor("user 40's failed device", 10*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#failures-user-devices tbody tr')];
		return rows.length === 1 && rows[0].dataset.outcome === 'failed' && rows[0].textContent.includes('UNREGISTERED');
	})()`)
	// The list is user 40's failure alone, and so is the download.
	e.waitFor("user 40's failures listed and exported", 10*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#failures tbody tr[data-token]')];
		const csv = document.querySelector('#btn-failures-csv');
		return rows.length === 1 && rows[0].dataset.user === '40' && !csv.hidden
			&& csv.getAttribute('href').endsWith('/outcomes?outcome=failed&format=csv&user_id=40');
	})()`)
	var pacedFull broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", paced.ID), nil, &pacedFull)
	e.click("#btn-failures-user-clear")
	e.waitFor("every user's failures again", 10*time.Second, fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#failures tbody tr[data-token]')];
		return rows.length === %d && document.querySelector('#btn-failures-csv').getAttribute('href').endsWith('/outcomes?outcome=failed&format=csv');
	})()`, min(pacedFull.Failed, 50)))
	e.setValue("#failures-user", "20")
	e.click("#btn-failures-user")
	e.waitFor("user 20 not in it", 10*time.Second, `!!document.querySelector('#failures-user-none') && !document.querySelector('#failures-user-devices')`)
	e.setValue("#failures-user", "21")
	e.click("#btn-failures-user")
	e.waitFor("user 21's delivered device", 10*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#failures-user-devices tbody tr')];
		return rows.length === 1 && rows[0].dataset.outcome === 'accepted';
	})()`)

	// A test send from a held broadcast: user 1's device with its
	// platform, and why user 20 got nothing (its token invalidated by
	// the short broadcast, UNREGISTERED), all inside the card.
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Held", "body": "b", "audience": map[string]any{"all": true}, "hold": true}, &held); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("held: %d", code)
	}
	var platform string
	if err := e.db.Get(&platform, "SELECT platform FROM device_tokens WHERE user_id = 1"); err != nil || platform == "" {
		t.Fatalf("user 1's token has no platform (%v): the column is untested", err)
	}
	e.route(fmt.Sprintf("#/broadcasts/%d", held.ID))
	e.watching(held.ID)
	e.setValue("#watch-test-user_ids", "1, 20")
	e.click("#btn-test")
	e.waitFor("the test-send result", 20*time.Second, `document.querySelectorAll('#test-results tbody tr[data-outcome="succeeded"]').length === 1`)
	if got := eval[string](e, "the summary", text("#test-summary")); got != "1 user, 1 device: 1 succeeded, 0 failed." {
		t.Errorf("test-send summary %q, want users and devices counted", got)
	}
	// The platform in words (Android, iOS, web), its raw value on hover.
	if got := eval[string](e, "the platform cell", `(() => { const td = document.querySelector('#test-results tbody tr td.platform'); return td.dataset.value + '|' + td.title + '|' + td.textContent; })()`); got != platform+"|"+platform+"|"+map[string]string{"android": "Android", "ios": "iOS", "web": "web"}[platform] {
		t.Errorf("platform cell %q, want %q in words with the raw value on hover", got, platform)
	}
	skip := eval[string](e, "user 20's reason", `(() => { const li = document.querySelector('#test-skipped li[data-user="20"]');
		return li ? li.dataset.reason + '|' + !!li.querySelector('time') + '|' + li.textContent : 'absent'; })()`)
	if !strings.HasPrefix(skip, "no_valid_tokens|true|") || !strings.Contains(skip, "UNREGISTERED") {
		t.Errorf("user 20's line: %q; want no valid tokens, when the last was invalidated and by UNREGISTERED", skip)
	}
	if over := eval[bool](e, "measuring the test report", `(() => { const r = document.querySelector('.test-report'), card = r.closest('.card');
		return r.getBoundingClientRect().right > card.getBoundingClientRect().right + 0.5; })()`); over {
		e.shot("overflow")
		t.Errorf("the test report runs out of its card")
	}

	// One canceled early: its reach is what it sent of its audience.
	var canceled broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"audience": map[string]any{"all": true}, "title": "Stopped", "max_rate": 20}, &canceled); code != http.StatusAccepted {
		t.Fatalf("the broadcast to cancel: %d %+v", code, canceled)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var b broadcast
		e.api("GET", fmt.Sprintf("/push/broadcasts/%d", canceled.ID), nil, &b)
		if b.Succeeded >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 20 sends in a minute: %+v", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := e.api("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", canceled.ID), map[string]any{}, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	var c broadcast
	for deadline := time.Now().Add(time.Minute); ; {
		e.api("GET", fmt.Sprintf("/push/broadcasts/%d", canceled.ID), nil, &c)
		if c.Status == "canceled" && c.Succeeded+c.Failed+c.Canceled == c.Targeted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not closed in a minute: %+v", c)
		}
		time.Sleep(100 * time.Millisecond)
	}
	reach := float64(c.Succeeded) / float64(c.Targeted)
	success := float64(c.Succeeded) / float64(c.Succeeded+c.Failed)
	if reach > 0.5 {
		t.Fatalf("reach %v: the cancel came too late to tell a short bar from a full one", reach)
	}
	e.route("#/")
	e.page("dashboard")
	bar := func(chart string) string {
		return fmt.Sprintf(`document.querySelector('#%s a[data-id="%d"]')`, chart, c.ID)
	}
	e.waitFor("the canceled broadcast's bars", 10*time.Second, bar("reach-chart")+` && `+bar("success-chart")+` !== null`)
	got := eval[[]float64](e, "measuring the reach bar", fmt.Sprintf(`(() => {
		const a = %s, r = a.querySelector('rect.bar'), hit = a.querySelector('rect.hit');
		return [Number(r.dataset.value), Number(r.getAttribute('height')) / Number(hit.getAttribute('height')), Number(%s.querySelector('rect.bar').dataset.value)];
	})()`, bar("reach-chart"), bar("success-chart")))
	if math.Abs(got[0]-reach) > 1e-9 || math.Abs(got[1]-reach) > 0.01 || math.Abs(got[2]-success) > 1e-9 {
		t.Errorf("the canceled broadcast's reach bar is %v high (%v of the plot), its success bar %v; want reach %v (%d of %d), success %v",
			got[0], got[1], got[2], reach, c.Succeeded, c.Targeted, success)
	}
	if cls := eval[string](e, "the reach bar's colour", bar("reach-chart")+`.querySelector('rect.bar').getAttribute('class')`); cls == "bar bar-good" {
		t.Errorf("a %v reach is drawn as a good (green) bar", reach)
	}
	label := eval[string](e, "the tooltip", bar("reach-chart")+`.querySelector('title').textContent`)
	for _, part := range []string{fmt.Sprintf("#%d", c.ID), "Stopped", "canceled", "reach ", "success rate "} {
		if !strings.Contains(label, part) {
			t.Errorf("the tooltip %q does not name %q", label, part)
		}
	}
	e.shot("dashboard")

	// In Korean, the dashboard and a broadcast's page miss no key.
	eval[bool](e, "choosing Korean", `(localStorage.setItem('pushfan.lang', 'ko'), true)`)
	e.do("opening the console again", 30*time.Second, chromedp.Navigate(e.url+"/"))
	e.page("dashboard")
	e.waitFor("the Korean dashboard", 10*time.Second, `document.querySelector('h1').textContent === '대시보드' && !!document.querySelector('#reach-chart a')`)
	e.route(fmt.Sprintf("#/broadcasts/%d", paced.ID))
	e.waitFor("the Korean broadcast page", 20*time.Second, fmt.Sprintf(`document.querySelector('h1')?.textContent === '발송 #%d' && document.querySelectorAll('#rate-chart path.line').length === 1
		&& document.querySelectorAll('#failures tbody tr[data-token]').length > 0`, paced.ID))
	if missing := eval[[]string](e, "the missing keys", `window.pushfanMissingKeys`); len(missing) != 0 {
		t.Errorf("keys missing in Korean: %v", missing)
	}
	e.shot("ko")
}

// watching waits for the watch page of broadcast id (not the one before
// it: both are the "watch" page).
func (e *env) watching(id uint64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("the page of broadcast %d", id), 20*time.Second,
		fmt.Sprintf(`document.body.dataset.page === 'watch' && document.querySelector('h1')?.textContent === 'Broadcast #%d' && !!document.querySelector('#watch-status')`, id))
}
