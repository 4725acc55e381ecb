package console_test

import (
	"fmt"
	"testing"
	"time"
)

// With a cap of 1/day and every user sent today, compose says how many
// users would be capped, and the watch page shows the broadcast's targets
// capped in the progress bar, its legend and its details.
func TestConsoleShowsTheFrequencyCap(t *testing.T) {
	e := newEnv(t, 400, "PUSHFAN_FREQUENCY_CAP=1/day")
	var first broadcast
	e.api("POST", "/push/broadcast", map[string]any{"title": "Earlier today", "audience": map[string]any{"all": true}}, &first)
	if first.Status != "completed" || first.Succeeded == 0 {
		t.Fatalf("the first broadcast: %+v", first)
	}
	e.signIn(senderToken)
	e.compose("Second today", "capped")
	e.waitFor(fmt.Sprintf("the preview to say %d users would be capped", first.Succeeded), 20*time.Second,
		fmt.Sprintf(`%s === '%d users would be capped'`, text("#preview-capped"), first.Succeeded))
	e.click("#btn-send")
	e.page("watch")
	e.waitFor("the broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var b broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", e.watchedID()), nil, &b)
	if b.Capped != b.Targeted || b.Succeeded != 0 || b.Targeted != first.Succeeded {
		t.Fatalf("the second broadcast: %+v; want all %d targets capped", b, first.Succeeded)
	}
	e.waitFor("the capped count and its segment", 10*time.Second, fmt.Sprintf(
		`Number(document.querySelector('#count-capped').dataset.value) === %d && document.querySelector('.seg-capped').style.width === '100%%'`, b.Capped))
	e.waitFor("the cap in the details", 10*time.Second, `[...document.querySelectorAll('dd')].some((d) => d.textContent === '1/day')`)
	e.shot("")

	// An alert goes past the cap: every user gets it, and it says so.
	e.compose("Alert", "past the cap")
	e.click("#f-frequency_cap")
	e.click("#btn-send")
	e.page("watch")
	e.waitFor("the alert to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var alert broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", e.watchedID()), nil, &alert)
	if alert.Capped != 0 || alert.Succeeded != first.Succeeded || alert.FrequencyCap != nil {
		t.Fatalf("the alert: %+v; want all %d sent, none capped, no cap recorded", alert, first.Succeeded)
	}
	e.waitFor("no cap in the details", 10*time.Second, `[...document.querySelectorAll('dd')].some((d) => d.textContent === 'none')`)
}
