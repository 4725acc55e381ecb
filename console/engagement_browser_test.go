package console_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/internal/devtools/demo"
)

// The console shows what the apps reported: the watch page's funnel and
// opens chart, its A/B variants side by side, and the dashboard's open
// rates, each equal to what was posted to /v1/events.
func TestConsoleShowsEngagement(t *testing.T) {
	const users = 200
	e := newEnv(t, users)
	e.emu.RecordMessages()
	var b struct {
		ID        uint64
		Status    string
		Succeeded int64
		Variants  map[string]int64
	}
	if code := e.api("POST", "/push/broadcast", map[string]any{"audience": map[string]any{"all": true},
		"variants": []map[string]any{{"name": "a", "weight": 1, "title": "A"}, {"name": "b", "weight": 1, "title": "B"}}}, &b); code != http.StatusOK || b.Status != "completed" {
		t.Fatalf("broadcast: %d %+v", code, b)
	}
	// 30 opens, 10 of them clicks too, and 50 receipts, from the tokens sent.
	var toks []string
	for uid := 1; uid <= users; uid++ {
		name := demo.SeedTokenName(uint64(uid), 1, uid%20 == 0)
		if got, ok, _ := e.emu.LastNotification(name); ok && e.emu.Counts(name).Accepted > 0 {
			toks = append(toks, got.Data["pushfan"])
		}
	}
	var evs []map[string]string
	for i, tok := range toks[:50] {
		evs = append(evs, map[string]string{"token": tok, "type": "received"})
		if i < 30 {
			evs = append(evs, map[string]string{"token": tok, "type": "opened"})
		}
		if i < 10 {
			evs = append(evs, map[string]string{"token": tok, "type": "clicked"})
		}
	}
	for i := 0; i < len(evs); i += 100 {
		var a struct{ Accepted int }
		if code := e.api("POST", "/v1/events", map[string]any{"events": evs[i:min(i+100, len(evs))]}, &a); code != http.StatusOK {
			t.Fatalf("events: %d", code)
		}
	}

	e.signIn(senderToken)
	e.route(fmt.Sprintf("#/broadcasts/%d", b.ID))
	e.page("watch")
	e.waitFor("the funnel", 20*time.Second, fmt.Sprintf(`(document.querySelector('#funnel-accepted')?.dataset.value === '%d') &&
		document.querySelector('#funnel-received').dataset.value === '50' && document.querySelector('#funnel-opened').dataset.value === '30' &&
		document.querySelector('#funnel-clicked').dataset.value === '10'`, b.Succeeded))
	e.waitFor("the opens chart", 10*time.Second, `document.querySelectorAll('#opens-chart path.line').length === 1 || document.querySelector('#opens-chart text') !== null`)
	e.waitFor("the two variants side by side", 10*time.Second, `document.querySelectorAll('#ab-table tbody tr').length === 2`)
	sent := eval[[]string](e, "reading the variants' sends", `[...document.querySelectorAll('#ab-table tbody tr')].map((tr) => tr.dataset.variant + '=' + tr.children[1].textContent.replace(/\D/g, ''))`)
	if want := []string{fmt.Sprintf("a=%d", b.Variants["a"]), fmt.Sprintf("b=%d", b.Variants["b"])}; fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Fatalf("variants' sends shown %v, want %v", sent, want)
	}

	e.route("#/")
	e.page("dashboard")
	e.waitFor("the open rate bar of the broadcast", 10*time.Second,
		fmt.Sprintf(`[...document.querySelectorAll('#open-rate-chart a')].some((a) => a.dataset.id === '%d' && a.getAttribute('aria-label').includes('30 of'))`, b.ID)+
			` || [...document.querySelectorAll('#open-rate-chart a')].some((a) => a.getAttribute('aria-label').includes('opened'))`)
	if got := eval[string](e, "reading the opened total", `document.querySelector('#stat-opened').dataset.value`); got != "30" {
		t.Fatalf("opened total shown %s, want 30", got)
	}
}

// On the compose page the sticky action bar never covers the field being
// edited: a field brought into view as the keyboard brings it (the nearest
// scroll), from just below the window's bottom edge, ends above the bar.
func TestComposeStickyBarCoversNoField(t *testing.T) {
	e := newEnv(t, 10)
	e.signIn(senderToken)
	e.route("#/compose")
	e.page("compose")
	for _, sel := range []string{"#f-quiet-start", "#f-quiet-end", "#f-send_at", "#f-max_rate"} {
		covered := eval[bool](e, "bringing "+sel+" into view", fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			// The field's bottom edge at the window's: where tabbing to it
			// from above leaves it without the fix.
			window.scrollTo(0, el.getBoundingClientRect().bottom + window.scrollY - window.innerHeight);
			el.scrollIntoView({block: 'nearest'});
			const bar = document.querySelector('.sticky-actions').getBoundingClientRect();
			const r = el.getBoundingClientRect();
			return r.bottom > bar.top && r.top < bar.bottom;
		})()`, sel))
		if covered {
			e.shot("covered")
			t.Errorf("%s is under the sticky action bar once brought into view", sel)
		}
	}
}
