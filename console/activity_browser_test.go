package console_test

import (
	"fmt"
	"testing"
	"time"
)

// The Activity page lists the audit trail: an admin releases a held
// broadcast on its page and finds the release, by name, on the Activity
// page, after the broadcast's creation; filtering by action keeps the
// release alone. A viewer has no Activity in the nav.
func TestConsoleActivityShowsTheRelease(t *testing.T) {
	e := newEnv(t, 20)
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Approve me", "body": "b", "audience": map[string]any{"all": true}, "hold": true}, &held); code != 202 && code != 200 {
		t.Fatalf("held: %d", code)
	}
	e.signIn(senderToken) // ops, an admin
	e.route(fmt.Sprintf("#/broadcasts/%d", held.ID))
	e.page("watch")
	e.waitFor("the held status", 10*time.Second, text("#watch-status")+` === 'held'`)
	e.click("#btn-release")
	e.waitFor("the confirm dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true`)
	e.click("#confirm-ok")
	e.waitFor("the release", 30*time.Second, text("#watch-status")+` !== 'held'`)

	e.waitFor("Activity in the nav", 10*time.Second, `!!document.querySelector('#nav a[href="#/activity"]')`)
	e.click(`#nav a[href="#/activity"]`)
	e.page("activity")
	target := fmt.Sprintf("broadcast:%d", held.ID)
	rows := `[...document.querySelectorAll('#activity-table tbody tr[data-entry]')]`
	// The broadcast's rows (a sign-in may be listed too).
	e.waitFor("the release and the creation, newest first", 10*time.Second, fmt.Sprintf(
		`%s.filter((r) => r.querySelector('.target').textContent === '%s').map((r) => r.dataset.action + ' ' + r.querySelector('.actor').textContent).join('|') === 'broadcast.release ops token|broadcast.create ops token'`,
		rows, target))

	e.setValue("#activity-action", "broadcast.release")
	e.click(`#activity-filters button[type="submit"]`)
	e.waitFor("the release alone", 10*time.Second, fmt.Sprintf(`%s.length === 1 && %s[0].dataset.action === 'broadcast.release'`, rows, rows))
	e.checkConsole()
}

// A viewer's nav has no Activity (the audit is an admin's).
func TestConsoleActivityIsAnAdminsPage(t *testing.T) {
	e := newEnv(t, 5)
	e.signIn(viewerToken)
	e.page("dashboard")
	e.waitFor("the nav", 10*time.Second, `document.querySelectorAll('#nav a').length > 0`)
	if n := eval[int](e, "the Activity links", `document.querySelectorAll('#nav a[href="#/activity"]').length`); n != 0 {
		t.Fatalf("a viewer's nav has %d Activity links", n)
	}
}
