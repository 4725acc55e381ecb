package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/oidcprovider"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
	"pushfan/server"
)

// auditLog records what the server gives its Auditor (the audit trail's
// store is the audit package's; here only what the sign-in routes hand it
// is checked).
type auditLog struct {
	mu      sync.Mutex
	entries []model.AuditEntry
}

func (a *auditLog) Record(_ context.Context, e model.AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, e)
	return nil
}

func (a *auditLog) take() []model.AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.entries
	a.entries = nil
	return out
}

const (
	oidcClientID = "pushfan-console"
	oidcSecret   = "console-secret-0123456789"
	oidcPassword = "correct horse battery staple"
)

// oidcWorld is a pushfan stack of two instances behind one public URL,
// signing people in through a real provider process. The public URL is a
// reverse proxy that sends the sign-in's start to the first instance and
// the provider's callback to the second: a sign-in begun on one replica
// must finish on another.
type oidcWorld struct {
	s        *teststack.Stack
	op       *oidcprovider.Provider
	public   string
	audit    *auditLog
	starts   []string // instance URLs that served a /console/oidc/login
	startsMu sync.Mutex
}

func newOIDCWorld(t *testing.T, configure func(*config.Config)) *oidcWorld {
	t.Helper()
	// The public address comes first: the provider knows the one
	// redirect URI it may send browsers to.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	op := oidcprovider.Start(t,
		[]oidcprovider.Client{{ID: oidcClientID, Secret: oidcSecret, RedirectURIs: []string{public + "/console/oidc/callback"}}},
		[]oidcprovider.User{
			{ID: "sub-alice", Username: "alice", Password: oidcPassword, Email: "alice@example.com", Name: "Alice", Groups: []string{"staff", "push-admins"}},
			{ID: "sub-bob", Username: "bob", Password: oidcPassword, Email: "bob@example.com", Name: "Bob", Groups: []string{"push-approvers", "push-senders"}},
			{ID: "sub-carol", Username: "carol", Password: oidcPassword, Email: "carol@example.com", Name: "Carol", Groups: []string{"push-senders"}},
			{ID: "sub-dave", Username: "dave", Password: oidcPassword, Email: "dave@example.com", Name: "Dave", Groups: []string{"push-viewers"}},
			{ID: "sub-erin", Username: "erin", Password: oidcPassword, Email: "erin@example.com", Name: "Erin", Groups: []string{"marketing"}},
		})
	w := &oidcWorld{op: op, public: public, audit: &auditLog{}}
	w.s = teststack.New(t, teststack.Options{ServerOptions: []server.Option{server.WithAuditor(w.audit)}, Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken}
		c.Events.PublicURL = w.public
		// The refusal tests fail more sign-ins than a minute's budget.
		c.HTTP.SignInFailuresPerMinute = 1000
		c.OIDC = config.OIDC{Issuer: op.Issuer, ClientID: oidcClientID, ClientSecret: oidcSecret, RolesClaim: "groups",
			Roles: map[string]string{"push-admins": "admin", "push-approvers": "approver", "push-senders": "sender", "push-viewers": "viewer"}}
		if configure != nil {
			configure(c)
		}
	}})
	second := w.s.AddInstance()
	first, _ := url.Parse(w.s.API.URL)
	other, _ := url.Parse(second.API.URL)
	toFirst, toSecond := httputil.NewSingleHostReverseProxy(first), httputil.NewSingleHostReverseProxy(other)
	front := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console/oidc/callback" {
			toSecond.ServeHTTP(rw, r)
			return
		}
		if r.URL.Path == "/console/oidc/login" {
			w.startsMu.Lock()
			w.starts = append(w.starts, first.String())
			w.startsMu.Unlock()
		}
		toFirst.ServeHTTP(rw, r)
	})}
	go func() { _ = front.Serve(ln) }()
	t.Cleanup(func() { _ = front.Close() })
	return w
}

// browser is a cookie jar's client that does not follow the console's
// redirects past what a test asks.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// authorize signs username in at the provider and returns the callback
// URL it sends the browser to (not yet followed).
func (w *oidcWorld) authorize(t *testing.T, b *http.Client, username string) *url.URL {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cb, err := oidcprovider.Authorize(ctx, b, w.public+"/console/oidc/login", "/console/oidc/callback", username, oidcPassword)
	if err != nil {
		t.Fatalf("sign %s in at the provider: %v", username, err)
	}
	return cb
}

// callback follows the provider's redirect to pushfan's callback as the
// browser would and returns the answer (not followed further) and its
// body.
func callback(t *testing.T, b *http.Client, cb *url.URL) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cb.String(), nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	noFollow := *b
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET callback: %v", err)
	}
	defer resp.Body.Close()
	return resp, string(readAll(t, resp))
}

// signInPerson signs username in through the provider and returns their
// console session, checking what GET /console/api/session says of them.
func (w *oidcWorld) signInPerson(t *testing.T, username, wantName, wantRole string) *session {
	t.Helper()
	b := browser(t)
	resp, body := callback(t, b, w.authorize(t, b, username))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("callback for %s: %d %s, want 303 to /console/: %.300s", username, resp.StatusCode, resp.Header.Get("Location"), body)
	}
	pub, _ := url.Parse(w.public)
	se := &session{s: w.s}
	for _, c := range b.Jar.Cookies(pub) {
		if c.Name == "pushfan_session" {
			se.cookie = c
		}
	}
	if se.cookie == nil {
		t.Fatalf("no session cookie for %s", username)
	}
	var who struct {
		SignedIn  bool   `json:"signed_in"`
		Kind      string `json:"kind"`
		Name      string `json:"name"`
		Role      string `json:"role"`
		CSRFToken string `json:"csrf_token"`
	}
	if r := se.call("GET", "/console/api/session", "", nil, &who); r.StatusCode != 200 || !who.SignedIn || who.Kind != "person" || who.Name != wantName || who.Role != wantRole || who.CSRFToken == "" {
		t.Fatalf("session of %s: %d %+v, want person %s with role %s", username, r.StatusCode, who, wantName, wantRole)
	}
	se.csrf, se.role = who.CSRFToken, who.Role
	return se
}

// Four people sign in through the provider, each with the highest role
// among their mapped groups, and each may do what that role may and no
// more; a person with no mapped group gets no session. Each sign-in
// starts on one replica and finishes on the other.
func TestOIDCSignInRolesThroughARealProvider(t *testing.T) {
	t.Parallel()
	w := newOIDCWorld(t, nil)
	w.s.SeedTokens(1, tokens("oidc-", 3))
	alice := w.signInPerson(t, "alice", "alice@example.com", "admin")
	bob := w.signInPerson(t, "bob", "bob@example.com", "approver")
	carol := w.signInPerson(t, "carol", "carol@example.com", "sender")
	dave := w.signInPerson(t, "dave", "dave@example.com", "viewer")
	if got := len(w.starts); got != 4 {
		t.Fatalf("%d sign-ins started, want 4", got)
	}
	entries := w.audit.take()
	if len(entries) != 4 {
		t.Fatalf("%d audit entries, want 4 signin: %+v", len(entries), entries)
	}
	for i, who := range []string{"sub-alice", "sub-bob", "sub-carol", "sub-dave"} {
		e := entries[i]
		if e.Action != "signin" || e.Actor.Kind != model.ActorPerson || e.Actor.ID != who || !strings.HasSuffix(e.Actor.Name, "@example.com") || e.IP == "" {
			t.Fatalf("entry %d: %+v, want signin of %s", i, e, who)
		}
	}

	held := hold(t, w.s, teststack.AdminToken, 3, nil)
	body := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"user_ids": []uint64{1}}, "dry_run": true}
	type try struct {
		method, path string
		body         any
		need         string
	}
	tries := []try{
		{"GET", "/push/stats", nil, "viewer"},
		{"POST", "/push/broadcast", body, "sender"},
		{"POST", "/push/audiences/reload", nil, "admin"},
	}
	rank := map[string]int{"viewer": 0, "sender": 1, "approver": 2, "admin": 3}
	for _, se := range []*session{alice, bob, carol, dave} {
		for _, tr := range tries {
			var e teststack.ErrorBody
			resp := se.call(tr.method, tr.path, se.csrf, tr.body, &e)
			allowed := rank[se.role] >= rank[tr.need]
			// Allowed: past the role check (a reload without a file
			// answers 422, which is the handler's, not the check's).
			if allowed && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode >= 500) || !allowed && (resp.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden") {
				t.Fatalf("%s (%s) %s %s: %d %+v, allowed %v", se.role, se.cookie.Name, tr.method, tr.path, resp.StatusCode, e, allowed)
			}
		}
	}
	// Releasing a held broadcast is an approver's: carol may not, bob may,
	// and the broadcast names him.
	release := fmt.Sprintf("/push/broadcasts/%d/release", held.ID)
	var e teststack.ErrorBody
	if resp := carol.call("POST", release, carol.csrf, nil, &e); resp.StatusCode != http.StatusForbidden || !strings.Contains(e.Error.Message, "approver") {
		t.Fatalf("carol's release: %d %+v", resp.StatusCode, e)
	}
	var r teststack.Broadcast
	if resp := bob.call("POST", release, bob.csrf, nil, &r); resp.StatusCode != http.StatusOK || r.ReleasedBy != "bob@example.com" {
		t.Fatalf("bob's release: %d released_by %q", resp.StatusCode, r.ReleasedBy)
	}
	if done := w.s.WaitFinished(held.ID, 30*time.Second); done.Succeeded != 3 {
		t.Fatalf("released broadcast: %+v", done)
	}

	// erin's only group has no role: no session, a page that says so, and
	// a signin.failed entry naming her.
	b := browser(t)
	resp, page := callback(t, b, w.authorize(t, b, "erin"))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "no_mapped_group") || !strings.Contains(page, "marketing") {
		t.Fatalf("erin: %d %.400s", resp.StatusCode, page)
	}
	pub, _ := url.Parse(w.public)
	if slices.ContainsFunc(b.Jar.Cookies(pub), func(c *http.Cookie) bool { return c.Name == "pushfan_session" }) {
		t.Fatal("erin got a session cookie")
	}
	failed := w.audit.take()
	if len(failed) != 1 || failed[0].Action != "signin.failed" || failed[0].Actor.ID != "sub-erin" || failed[0].Actor.Name != "erin@example.com" ||
		!strings.Contains(string(failed[0].Detail), "no_mapped_group") {
		t.Fatalf("entries after erin: %+v", failed)
	}

	// Signing out ends the person's session on every replica.
	if resp := alice.call("DELETE", "/console/api/session", alice.csrf, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp := alice.call("GET", "/push/stats", "", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", resp.StatusCode)
	}
}

// Each way an ID token or a callback can be wrong is refused (401 and a
// page saying why, never a 500) with a signin.failed entry: a replayed
// state, a token for another audience, an expired one, one with no nonce,
// one whose claims were changed under the provider's signature. A signing
// key the provider rotated to is fetched from its JWKS and accepted.
func TestOIDCRefusesBadTokensAndFollowsKeyRotation(t *testing.T) {
	t.Parallel()
	w := newOIDCWorld(t, nil)

	// A replayed callback: the first use signs in, the second (the same
	// code and state, the same browser) is refused.
	b := browser(t)
	cb := w.authorize(t, b, "carol")
	if resp, body := callback(t, b, cb); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first callback: %d %.300s", resp.StatusCode, body)
	}
	resp, page := callback(t, b, cb)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "state_unknown") {
		t.Fatalf("replayed callback: %d %.300s", resp.StatusCode, page)
	}
	if got := w.audit.take(); len(got) != 2 || got[0].Action != "signin" || got[1].Action != "signin.failed" || !strings.Contains(string(got[1].Detail), "state_unknown") {
		t.Fatalf("entries after the replay: %+v", got)
	}

	// A state carried to another browser (no state cookie) is refused too.
	cb = w.authorize(t, browser(t), "carol")
	if resp, page := callback(t, browser(t), cb); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "state_not_this_browser") {
		t.Fatalf("another browser's state: %d %.300s", resp.StatusCode, page)
	}
	if got := w.audit.take(); len(got) != 1 || got[0].Action != "signin.failed" {
		t.Fatalf("entries after another browser's state: %+v", got)
	}

	for _, c := range []struct{ fault, code, why string }{
		{"aud", "id_token_invalid", "audience"},
		{"expired", "id_token_expired", "expired"},
		{"nonce", "nonce_missing", "nonce"},
		{"tamper", "id_token_invalid", "signature"},
	} {
		b := browser(t)
		cb := w.authorize(t, b, "alice")
		w.op.Fault(t, c.fault)
		resp, page := callback(t, b, cb)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, c.code) || !strings.Contains(page, c.why) {
			t.Fatalf("%s: %d %.400s, want 401 %s mentioning %q", c.fault, resp.StatusCode, page, c.code, c.why)
		}
		got := w.audit.take()
		if len(got) != 1 || got[0].Action != "signin.failed" || got[0].Actor.Kind != model.ActorPerson || !strings.Contains(string(got[0].Detail), c.code) {
			t.Fatalf("%s: entries %+v", c.fault, got)
		}
	}
	// The same refusals as JSON for a client that does not ask for a page.
	b = browser(t)
	cb = w.authorize(t, b, "alice")
	w.op.Fault(t, "nonce")
	var e teststack.ErrorBody
	req, _ := http.NewRequest(http.MethodGet, cb.String(), nil)
	jresp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, readAll(t, jresp), &e)
	jresp.Body.Close()
	if jresp.StatusCode != http.StatusUnauthorized || e.Error.Code != "nonce_missing" {
		t.Fatalf("JSON refusal: %d %+v", jresp.StatusCode, e)
	}
	w.audit.take()

	// The provider rotates its key (the old one leaves its JWKS): the next
	// sign-in's token names a key pushfan has not seen, which it fetches.
	w.signInPerson(t, "alice", "alice@example.com", "admin")
	w.op.Rotate(t)
	w.signInPerson(t, "bob", "bob@example.com", "approver")
	if got := w.audit.take(); len(got) != 2 || got[0].Action != "signin" || got[1].Action != "signin" {
		t.Fatalf("entries around the rotation: %+v", got)
	}
}

// PUSHFAN_TOKEN_SIGNIN=false: the console's token sign-in is refused (403
// naming the switch), the session answer offers the provider only, and
// bearer tokens on the API still work. The token sign-in that is on
// records a signin entry for the token.
func TestTokenSignInSwitch(t *testing.T) {
	t.Parallel()
	w := newOIDCWorld(t, func(c *config.Config) { c.HTTP.TokenSignIn = false })
	var e teststack.ErrorBody
	se := &session{s: w.s}
	if resp := se.call("POST", "/console/api/session", "", map[string]string{"token": teststack.AdminToken}, &e); resp.StatusCode != http.StatusForbidden || e.Error.Code != "token_signin_disabled" {
		t.Fatalf("token sign-in when off: %d %+v", resp.StatusCode, e)
	}
	var who struct {
		SignedIn bool `json:"signed_in"`
		SignIn   struct {
			Token bool `json:"token"`
			OIDC  struct {
				Provider string `json:"provider"`
				LoginURL string `json:"login_url"`
			} `json:"oidc"`
		} `json:"sign_in"`
	}
	if resp := se.call("GET", "/console/api/session", "", nil, &who); resp.StatusCode != 200 || who.SignedIn || who.SignIn.Token ||
		who.SignIn.OIDC.Provider != "127.0.0.1" || who.SignIn.OIDC.LoginURL != "/console/oidc/login" {
		t.Fatalf("session answer: %d %+v", resp.StatusCode, who)
	}
	if resp := w.s.Do("GET", "/push/stats", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("bearer token with token sign-in off: %d", resp.StatusCode)
	}
	if got := w.audit.take(); len(got) != 0 {
		t.Fatalf("entries: %+v", got)
	}

	on := newOIDCWorld(t, nil)
	signIn(t, on.s, teststack.AdminToken)
	if got := on.audit.take(); len(got) != 1 || got[0].Action != "signin" || got[0].Actor.Kind != model.ActorToken || got[0].Actor.Name != "admin-1" {
		t.Fatalf("token sign-in entries: %+v", got)
	}
}
