package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A viewer looks a user up (a bad id refused next to its input): the
// user's broadcast with each device's outcome as the API keeps it; and on
// the broadcast's page downloads its outcomes, a CSV line per target.
func TestConsoleLooksUpAUserAndDownloadsOutcomes(t *testing.T) {
	e := newEnv(t, 40) // every 20th token dead
	var b broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Tuesday", "audience": map[string]any{"all": true}}, &b); code != 202 {
		t.Fatalf("submit: %d", code)
	}
	deadline := time.Now().Add(time.Minute)
	for !b.Final() {
		if time.Now().After(deadline) {
			t.Fatalf("broadcast %d not finished: %+v", b.ID, b)
		}
		time.Sleep(50 * time.Millisecond)
		e.api("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &b)
	}
	// A user with a dead token, and one without.
	var dead, alive uint64
	if err := e.db.Get(&dead, "SELECT user_id FROM device_tokens WHERE invalidated_at IS NOT NULL ORDER BY id LIMIT 1"); err != nil {
		t.Fatalf("a dead token's user: %v (failed %d)", err, b.Failed)
	}
	if err := e.db.Get(&alive, "SELECT user_id FROM device_tokens WHERE invalidated_at IS NULL ORDER BY id LIMIT 1"); err != nil {
		t.Fatal(err)
	}

	e.signIn(viewerToken)
	if !eval[bool](e, "the Users nav item", `!!document.querySelector('#nav a[href="#/users"]')`) {
		t.Fatal("no Users item in the nav")
	}
	e.route("#/users")
	e.page("users")
	e.setValue("#user-id", "abc")
	e.click("#user-lookup")
	e.waitFor("the id's error next to it", 10*time.Second, `document.querySelector('[data-error-for="id"]') !== null
		&& document.querySelector('#user-id').getAttribute('aria-invalid') === 'true'`)

	e.setValue("#user-id", fmt.Sprint(dead))
	e.click("#user-lookup")
	row := fmt.Sprintf(`document.querySelector('#user-deliveries-table tr[data-broadcast="%d"]')`, b.ID)
	e.waitFor("the dead token's outcome", 10*time.Second, row+`?.querySelector('td.outcome-failed')?.textContent.includes('UNREGISTERED')`)
	e.shot("dead")
	e.setValue("#user-id", fmt.Sprint(alive))
	e.click("#user-lookup")
	e.waitFor("the live token's outcome", 10*time.Second, row+`?.querySelector('td.outcome-accepted') != null`)
	if got := eval[string](e, "the row", row+`.innerText`); !strings.Contains(got, "Tuesday") {
		t.Fatalf("the broadcast's row: %q", got)
	}

	e.route(fmt.Sprintf("#/broadcasts/%d", b.ID))
	e.page("watch")
	e.waitFor("the download button", 10*time.Second, `document.querySelector('#btn-outcomes')?.getAttribute('href')?.endsWith('format=csv')`)
	// What the link downloads, fetched as the browser would (the session
	// cookie): a header and a line per target.
	lines := eval[int](e, "the CSV's lines", `fetch(document.querySelector('#btn-outcomes').href, {credentials: 'same-origin'})
		.then((r) => r.text()).then((t) => t.trim().split('\n').length)`)
	if int64(lines) != b.Targeted+1 {
		t.Fatalf("the CSV has %d lines, want %d targets and a header", lines, b.Targeted)
	}
}
