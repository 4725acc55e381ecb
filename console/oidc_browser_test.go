package console_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pushfan/internal/testsupport/oidcprovider"
)

// TestConsoleSignsInThroughTheProvider: Chromium signs in through a real
// OIDC provider process (the "Sign in with" button, the provider's login
// page, back to the console), the header names the person, the token form
// is hidden (PUSHFAN_TOKEN_SIGNIN=false), and the person, an approver by
// their group, releases a held broadcast, which then names them; an
// admin, signed in next through the provider, sees the release by the
// approver's name on the Activity page.
func TestConsoleSignsInThroughTheProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test (Chromium, the pushfan binary, an OIDC provider process): make test runs it, make test-short does not")
	}
	// The public address first: the provider must know the redirect URI,
	// and pushfan's own port is chosen when it starts. A reverse proxy
	// there forwards to pushfan, as a deployment's would.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	const password = "correct horse battery staple"
	op := oidcprovider.Start(t,
		[]oidcprovider.Client{{ID: "pushfan-console", Secret: "console-secret-0123456789", RedirectURIs: []string{public + "/console/oidc/callback"}}},
		[]oidcprovider.User{{ID: "sub-bob", Username: "bob", Password: password, Email: "bob@example.com", Name: "Bob", Groups: []string{"push-approvers"}},
			{ID: "sub-ann", Username: "ann", Password: password, Email: "ann@example.com", Name: "Ann", Groups: []string{"push-admins"}}})
	yaml := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(yaml, []byte("oidc:\n  roles:\n    push-admins: admin\n    push-approvers: approver\n    \"*\": viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var upstream atomic.Pointer[httputil.ReverseProxy]
	front := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := upstream.Load(); p != nil {
			p.ServeHTTP(w, r)
			return
		}
		http.Error(w, "pushfan is not up yet", http.StatusServiceUnavailable)
	})}
	go func() { _ = front.Serve(ln) }()
	t.Cleanup(func() { _ = front.Close() })

	e := newEnv(t, 20, "PUSHFAN_CONFIG="+yaml, "PUSHFAN_OIDC_ISSUER="+op.Issuer, "PUSHFAN_OIDC_CLIENT_ID=pushfan-console",
		"PUSHFAN_OIDC_CLIENT_SECRET=console-secret-0123456789", "PUSHFAN_PUBLIC_URL="+public, "PUSHFAN_TOKEN_SIGNIN=false")
	target, _ := url.Parse(e.url)
	upstream.Store(httputil.NewSingleHostReverseProxy(target))

	want := e.eligibleTokens()
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Approve me", "body": "b", "audience": map[string]any{"all": true}, "hold": true}, &held); code != 202 && code != 200 {
		t.Fatalf("held: %d", code)
	}

	e.do("opening the console", 30*time.Second, chromedp.Navigate(public+"/console/"))
	e.page("signin")
	e.waitFor("the provider's button", 10*time.Second, `document.querySelector('#signin-oidc')?.textContent === 'Sign in with 127.0.0.1'`)
	if n := eval[int](e, "counting token inputs", `document.querySelectorAll('#signin-token').length`); n != 0 {
		t.Fatalf("%d token inputs with PUSHFAN_TOKEN_SIGNIN=false, want 0", n)
	}
	// The provider's login page asks for a favicon it does not have.
	e.expectBrowserError("favicon.ico")
	signIn := func(user, email, role string) {
		t.Helper()
		e.click("#signin-oidc")
		// The provider's own login page.
		e.do("filling the provider's login page", 30*time.Second,
			chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), user),
			chromedp.SendKeys(chromedp.CSS("#password"), password+"\r"))
		// Back through the callback to the console (a navigation a poll
		// cannot span: wait for the header's element first).
		e.do("coming back to the console", 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#whoami")))
		e.page("dashboard")
		e.waitFor("the person's name in the header", 10*time.Second, fmt.Sprintf(
			`document.querySelector('#whoami .whoami-name')?.textContent === %q && document.body.dataset.role === %q`, email, role))
	}
	signIn("bob", "bob@example.com", "approver")

	e.route(fmt.Sprintf("#/broadcasts/%d", held.ID))
	e.page("watch")
	e.waitFor("the held status", 10*time.Second, text("#watch-status")+` === 'held'`)
	e.click("#btn-release")
	e.waitFor("the confirm dialog", 10*time.Second, `document.querySelector('#confirm')?.open === true`)
	e.click("#confirm-ok")
	e.waitFor("the released broadcast to complete", 60*time.Second, text("#watch-status")+` === 'completed'`)
	var b broadcast
	e.api("GET", fmt.Sprintf("/push/broadcasts/%d", held.ID), nil, &b)
	if b.ReleasedBy != "bob@example.com" || b.Targeted != want || b.Succeeded+b.Failed != want {
		t.Fatalf("released: released_by %q, %d targeted (want %d), %d+%d counted", b.ReleasedBy, b.Targeted, want, b.Succeeded, b.Failed)
	}
	if n := eval[int](e, "the approver's Activity links", `document.querySelectorAll('#nav a[href="#/activity"]').length`); n != 0 {
		t.Fatalf("an approver's nav has %d Activity links; the audit is an admin's", n)
	}

	// Ann, an admin by her group, sees bob's release on the Activity page.
	e.click("#signout")
	e.page("signin")
	signIn("ann", "ann@example.com", "admin")
	e.click(`#nav a[href="#/activity"]`)
	e.page("activity")
	e.waitFor("bob's release, by his name", 10*time.Second, fmt.Sprintf(
		`[...document.querySelectorAll('#activity-table tbody tr[data-entry]')].some((r) => r.dataset.action === 'broadcast.release'
			&& r.querySelector('.target').textContent === 'broadcast:%d' && r.querySelector('.actor').textContent === 'bob@example.com person')`, held.ID))
}
