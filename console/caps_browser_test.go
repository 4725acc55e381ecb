package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// capsConfig names a cap and gives it to a named audience of every user.
const capsConfig = `
frequency_caps:
  marketing: "1/day"
audiences:
  - name: everyone
    frequency_cap: marketing
    sql: |
      SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token
      FROM device_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1
      ORDER BY t.id LIMIT :limit
`

// With a cap of 1/day and every user sent today, compose says which cap
// the broadcast would take and how many users it would withhold (for a
// named audience too, under its named cap, and none past the cap), and
// the watch page shows the broadcast's targets capped in the progress
// bar, its legend and its details.
func TestConsoleShowsTheFrequencyCap(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(capsConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 400, "PUSHFAN_FREQUENCY_CAP=1/day", "PUSHFAN_CONFIG="+cfgPath)
	var first broadcast
	e.api("POST", "/push/broadcast", map[string]any{"title": "Earlier today", "audience": map[string]any{"all": true}}, &first)
	if first.Status != "completed" || first.Succeeded == 0 {
		t.Fatalf("the first broadcast: %+v", first)
	}
	e.signIn(senderToken)
	e.compose("Second today", "capped")
	e.waitFor(fmt.Sprintf("the preview to say %d users would be capped", first.Succeeded), 20*time.Second,
		fmt.Sprintf(`%s === '%d users would be capped'`, text("#preview-capped"), first.Succeeded))
	e.waitFor("the preview to name the default cap", 10*time.Second, text("#preview-cap")+` === 'Cap 1/day (default)'`)
	// Past the cap, nobody is withheld; back under it, they are again.
	e.click("#f-frequency_cap")
	e.waitFor("the preview to say the broadcast goes past the cap", 20*time.Second,
		text("#preview-cap")+` === 'No cap: sent past the cap' && document.querySelector('#preview-capped').hidden`)
	e.click("#f-frequency_cap")
	e.waitFor(fmt.Sprintf("the preview to say %d users would be capped again", first.Succeeded), 20*time.Second,
		fmt.Sprintf(`%s === 'Cap 1/day (default)' && %s === '%d users would be capped'`, text("#preview-cap"), text("#preview-capped"), first.Succeeded))
	e.send()
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
	e.send()
	e.page("watch")
	e.waitFor("the alert to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var alert broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", e.watchedID()), nil, &alert)
	if alert.Capped != 0 || alert.Succeeded != first.Succeeded || alert.FrequencyCap != nil {
		t.Fatalf("the alert: %+v; want all %d sent, none capped, no cap recorded", alert, first.Succeeded)
	}
	e.waitFor("no cap in the details", 10*time.Second, `[...document.querySelectorAll('dd')].some((d) => d.textContent === 'none')`)

	// A named audience takes its named cap: the same users are capped
	// under it (the alert took no slot).
	e.compose("Named", "marketing")
	e.setValue("#f-audience-name", "everyone")
	e.waitFor(fmt.Sprintf("the named audience's preview to say %d users would be capped under marketing", first.Succeeded), 20*time.Second,
		fmt.Sprintf(`%s === 'Cap 1/day (named: marketing)' && %s === '%d users would be capped'`, text("#preview-cap"), text("#preview-capped"), first.Succeeded))
	e.shot("named")
}
