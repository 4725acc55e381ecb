package console_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pushfan/internal/devtools/demo"
)

// campaignTotals are a group's summed counters.
type campaignTotals struct{ broadcasts, targeted, succeeded, failed, opened, clicked int64 }

// A viewer opens Campaigns: the table shows, per category, exactly the
// totals of the broadcasts sent (opens and clicks as reported through the
// events route); the chart has a bar with its value; the CSV download's
// rows are the table's; grouping by analytics label regroups them; the
// breakdowns by app and by platform hold every send; the Korean page has
// every string.
func TestConsoleCampaignsShowTheExactTotals(t *testing.T) {
	const users = 40
	cfg := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfg, []byte("categories:\n  - name: promo\n  - name: news\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, users, "PUSHFAN_CONFIG="+cfg) // every 20th token dead
	e.emu.RecordMessages()
	want := map[string]*campaignTotals{}
	send := func(category, label string, opens, clicks int) {
		t.Helper()
		body := map[string]any{"title": "t", "category": category, "audience": map[string]any{"all": true}}
		if label != "" {
			body["analytics_label"] = label
		}
		var b broadcast
		if code := e.api("POST", "/push/broadcast", body, &b); code != http.StatusOK || b.Status != "completed" {
			t.Fatalf("broadcast: %d %+v", code, b)
		}
		w := want[category]
		if w == nil {
			w = &campaignTotals{}
			want[category] = w
		}
		w.broadcasts++
		w.targeted, w.succeeded, w.failed = w.targeted+b.Targeted, w.succeeded+b.Succeeded, w.failed+b.Failed
		w.opened, w.clicked = w.opened+int64(opens), w.clicked+int64(clicks)
		var evs []map[string]string
		for uid := 1; uid <= users && len(evs) < opens+clicks; uid++ {
			name := demo.SeedTokenName(uint64(uid), 1, uid%20 == 0)
			got, ok, _ := e.emu.LastNotification(name)
			if !ok || uid%20 == 0 {
				continue
			}
			evs = append(evs, map[string]string{"token": got.Data["pushfan"], "type": "opened"})
			if len(evs) <= 2*clicks {
				evs = append(evs, map[string]string{"token": got.Data["pushfan"], "type": "clicked"})
			}
		}
		if len(evs) == 0 {
			return
		}
		var a struct{ Accepted int }
		if code := e.api("POST", "/v1/events", map[string]any{"events": evs}, &a); code != http.StatusOK || a.Accepted != opens+clicks {
			t.Fatalf("events: %d %+v", code, a)
		}
	}
	send("promo", "bf", 6, 2)
	send("promo", "", 3, 0)
	send("news", "", 0, 0)

	e.signIn(viewerToken)
	if !eval[bool](e, "the Campaigns nav item", `!!document.querySelector('#nav a[href="#/campaigns"]')`) {
		t.Fatal("no Campaigns item in the nav")
	}
	e.route("#/campaigns")
	e.page("campaigns")
	e.waitFor("the campaigns table", 20*time.Second, `document.querySelectorAll('#campaigns-table tbody tr[data-group]').length > 0`)
	// The table's cells (data-value: the exact numbers), ratios to the
	// CSV's 6 decimals.
	const tableRows = `[...document.querySelectorAll('#campaigns-table tbody tr[data-group]')].map((tr) => [tr.dataset.group, tr.dataset.period,
		...['broadcasts', 'targeted', 'succeeded', 'failed', 'opened', 'clicked'].map((c) => tr.querySelector('td.' + c).dataset.value),
		...['reach', 'ctr'].map((c) => Number(tr.querySelector('td.' + c).dataset.value).toFixed(6))])`
	rows := eval[[][]string](e, "the table's rows", tableRows)
	// Summed per group: a test at midnight may see two days.
	got := map[string]*campaignTotals{}
	for _, r := range rows {
		g := got[r[0]]
		if g == nil {
			g = &campaignTotals{}
			got[r[0]] = g
		}
		n := func(i int) int64 {
			v, err := strconv.ParseInt(r[i], 10, 64)
			if err != nil {
				t.Fatalf("row %v: %v", r, err)
			}
			return v
		}
		g.broadcasts, g.targeted, g.succeeded, g.failed, g.opened, g.clicked = g.broadcasts+n(2), g.targeted+n(3), g.succeeded+n(4), g.failed+n(5), g.opened+n(6), g.clicked+n(7)
	}
	if len(got) != 2 || *got["promo"] != *want["promo"] || *got["news"] != *want["news"] {
		t.Fatalf("the table shows %v %v, want promo %+v news %+v (rows %v)", got["promo"], got["news"], *want["promo"], *want["news"], rows)
	}
	// The chart: a bar per day of the 30 shown, those with sends with
	// their value written on them, summing to every send.
	sent := want["promo"].succeeded + want["promo"].failed + want["news"].succeeded + want["news"].failed
	if !eval[bool](e, "the chart's bars", fmt.Sprintf(`(() => { const bars = [...document.querySelectorAll('#campaigns-chart g.cbar')];
		const full = bars.filter((g) => g.dataset.value !== '0');
		return bars.length === 30 && full.length > 0 && full.every((g) => g.querySelector('text.cbar-value')?.textContent !== '')
			&& bars.reduce((n, g) => n + Number(g.dataset.value), 0) === %d })()`, sent)) {
		t.Fatal("the chart has not a bar per day, with the values, summing to every send")
	}
	e.shot("en")

	// The CSV download is the table.
	const csvRows = `fetch(document.querySelector('#campaigns-csv').href, {credentials: 'same-origin'}).then((r) => r.text())
		.then((t) => t.trim().split('\n').slice(1).map((l) => l.split(',')))`
	if csv := eval[[][]string](e, "the CSV's rows", csvRows); !slices.EqualFunc(csv, rows, slices.Equal) {
		t.Fatalf("the CSV's rows %v, the table's %v", csv, rows)
	}

	// By analytics label: bf (the first), promo and news (their
	// categories' names).
	e.setValue("#campaigns-group", "label")
	e.waitFor("the rows by label", 20*time.Second, `document.querySelector('#campaigns-table tbody tr[data-group="bf"]') !== null`)
	labels := eval[[]string](e, "the labels", `[...new Set([...document.querySelectorAll('#campaigns-table tbody tr[data-group]')].map((tr) => tr.dataset.group))].sort()`)
	if fmt.Sprint(labels) != "[bf news promo]" {
		t.Fatalf("labels shown %v", labels)
	}
	// The breakdown by app: every send of the range in the one app.
	e.waitFor("the breakdown by app", 20*time.Second, fmt.Sprintf(`document.querySelector('#campaigns-breakdown-table tr[data-key="default"] td.sent')?.dataset.value === '%d'`, sent))
	e.setValue("#campaigns-by", "platform")
	// By platform: every send under its token's platform (the seeded
	// tokens are the users' first: android), with a success rate, every
	// open and click there (each event token carried android), and the
	// note saying what a platform has.
	var opened, clicked int64
	for _, w := range want {
		opened, clicked = opened+w.opened, clicked+w.clicked
	}
	e.waitFor("the breakdown by platform", 20*time.Second, fmt.Sprintf(`(() => {
		const trs = [...document.querySelectorAll('#campaigns-breakdown-table tbody tr[data-key]')];
		return document.querySelector('#campaigns-note') !== null && trs.length === 1
			&& trs.every((tr) => tr.dataset.key === 'android' && tr.querySelector('td.success-rate').dataset.value !== ''
				&& tr.querySelector('td.opened').dataset.value === '%d' && tr.querySelector('td.clicked').dataset.value === '%d')
			&& trs.reduce((n, tr) => n + Number(tr.querySelector('td.sent').dataset.value), 0) === %d })()`, opened, clicked, sent))

	// A range over 400 days is refused, in words.
	e.expectBrowserError("/push/campaigns")
	e.setValue("#campaigns-from", "2020-01-01")
	e.waitFor("the range's refusal", 20*time.Second, `!document.querySelector('#campaigns-error').hidden`)

	// Korean: every string there.
	eval[bool](e, "choosing Korean", `(localStorage.setItem('pushfan.lang', 'ko'), true)`)
	e.do("reloading", 30*time.Second, chromedp.Reload())
	e.page("campaigns")
	e.waitFor("the Korean table", 20*time.Second, `document.querySelectorAll('#campaigns-table tbody tr[data-group]').length > 0 && document.querySelector('h1').textContent === '캠페인'`)
	if missing := eval[[]string](e, "the missing keys", `window.pushfanMissingKeys`); len(missing) != 0 {
		t.Fatalf("missing catalog keys: %v", missing)
	}
	e.shot("ko")
	e.checkConsole()
}
