package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// keyStatus is the answer to GET /push/stats with key as the bearer.
func (e *env) keyStatus(key string) int {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+"/push/stats", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An admin creates a key on the Keys page (a bad name refused next to its
// input), sees its secret once with a copy button, uses it, sees when it
// was last used, and revokes it behind a confirmation; the key stops
// working. A viewer has no Keys page in the nav.
func TestConsoleManagesAPIKeys(t *testing.T) {
	e := newEnv(t, 5)
	e.signIn(senderToken) // ops, an admin
	if !eval[bool](e, "the Keys nav item", `!!document.querySelector('#nav a[href="#/keys"]')`) {
		t.Fatal("an admin has no Keys item in the nav")
	}
	e.route("#/keys")
	e.page("keys")
	e.waitFor("the empty list", 10*time.Second, `document.querySelector('#keys-table tr.empty') !== null`)

	e.expectBrowserError("400")
	e.setValue("#key-name", "two words")
	e.click("#key-create")
	e.waitFor("the name's error next to it", 10*time.Second, `document.querySelector('[data-error-for="name"]')?.textContent.includes('must be 1 to 64')
		&& document.querySelector('#key-name').getAttribute('aria-invalid') === 'true'`)

	e.setValue("#key-name", "cron")
	e.setValue("#key-role", "sender")
	e.setValue("#key-expires", "90d")
	e.click("#key-create")
	e.waitFor("the new key shown once", 10*time.Second, `!document.querySelector('#key-created').hidden
		&& document.querySelector('#key-secret').value.startsWith('pfk_') && !!document.querySelector('#key-copy')
		&& document.querySelector('#keys-table tr[data-key]') !== null`)
	key := eval[string](e, "the secret", `document.querySelector('#key-secret').value`)
	id := eval[string](e, "the new row's id", `document.querySelector('#keys-table tr[data-key]')?.dataset.key || ''`)
	if !strings.HasPrefix(id, "key_") || e.count0(`#keys-table tr[data-key]`) != 1 {
		t.Fatalf("after the create: row id %q", id)
	}
	row := fmt.Sprintf(`document.querySelector('#keys-table tr[data-key=%q]')`, id)
	if got := eval[string](e, "the row", row+`.innerText`); !strings.Contains(got, "cron") || !strings.Contains(got, "sender") || !strings.Contains(got, "never") || strings.Contains(got, key) {
		t.Fatalf("the new key's row: %q", got)
	}
	e.shot("created")

	if code := e.keyStatus(key); code != http.StatusOK {
		t.Fatalf("the new key: %d", code)
	}
	// The list again: its last use is shown, and the secret is gone.
	e.route("#/")
	e.page("dashboard")
	e.route("#/keys")
	e.page("keys")
	e.waitFor("the last use", 10*time.Second, row+`?.querySelector('td.last-used time') !== null`)
	if eval[bool](e, "looking for the secret", `!!document.querySelector('#key-secret') || document.body.innerText.includes(`+fmt.Sprintf("%q", key)+`)`) {
		t.Fatal("the secret is shown again after leaving the page")
	}

	e.click(fmt.Sprintf(`#keys-table tr[data-key=%q] button.revoke`, id))
	e.waitFor("the confirmation", 10*time.Second, `document.querySelector('#confirm').open && document.querySelector('#confirm-title').textContent.includes('cron')`)
	e.click("#confirm-ok")
	e.waitFor("the key revoked", 10*time.Second, row+`?.dataset.status === 'revoked' && !`+row+`.querySelector('button.revoke')`)
	if code := e.keyStatus(key); code != http.StatusUnauthorized {
		t.Fatalf("the revoked key: %d, want 401", code)
	}
	e.shot("revoked")

	e.click("#signout")
	e.page("signin")
	e.signIn(viewerToken)
	if eval[bool](e, "the viewer's nav", `!!document.querySelector('#nav a[href="#/keys"]')`) {
		t.Fatal("a viewer has a Keys item in the nav")
	}
}

// count0 is how many elements match sel.
func (e *env) count0(sel string) int {
	e.t.Helper()
	return eval[int](e, "counting "+sel, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}
