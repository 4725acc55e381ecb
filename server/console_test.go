package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// session is a console sign-in as a browser holds it: the cookie and the
// CSRF token the server answered.
type session struct {
	s      *teststack.Stack
	cookie *http.Cookie
	csrf   string
	role   string
}

// call sends a request with the session's cookie (and csrf as X-CSRF-Token
// when not empty) through the stack's contract-checking client.
func (se *session) call(method, path, csrf string, body any, out any) *http.Response {
	t := se.s.T
	t.Helper()
	var r io.Reader
	if body != nil {
		r = jsonBody(t.(*testing.T), body)
	}
	req, err := http.NewRequest(method, se.s.API.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if se.cookie != nil {
		req.AddCookie(se.cookie)
	}
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := se.s.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw := readAll(t.(*testing.T), resp)
	if out != nil && len(raw) > 0 {
		decode(t.(*testing.T), raw, out)
	}
	return resp
}

func signIn(t *testing.T, s *teststack.Stack, token string) *session {
	t.Helper()
	se := &session{s: s}
	var v struct {
		Name      string    `json:"name"`
		Role      string    `json:"role"`
		CSRFToken string    `json:"csrf_token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	resp := se.call("POST", "/console/api/session", "", map[string]string{"token": token}, &v)
	if resp.StatusCode != 200 {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "pushfan_session" {
			se.cookie = c
		}
	}
	if se.cookie == nil || v.CSRFToken == "" {
		t.Fatalf("sign in answered no cookie or csrf token: %v %+v", resp.Header["Set-Cookie"], v)
	}
	se.csrf, se.role = v.CSRFToken, v.Role
	return se
}

func consoleStack(t *testing.T, configure func(*config.Config)) *teststack.Stack {
	return teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken, "dashboard:viewer:" + viewerToken}
		if configure != nil {
			configure(c)
		}
	}})
}

func TestConsoleSessionCookieCSRFAndSignOut(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 5))
	se := signIn(t, s, teststack.AdminToken)
	c := se.cookie
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.MaxAge != int((12*time.Hour).Seconds()) || c.Path != "/" || len(c.Value) != 43 {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, Max-Age 12h, Path /, 43 chars", c)
	}
	if se.role != "admin" {
		t.Fatalf("role %q", se.role)
	}
	var who struct {
		Name      string `json:"name"`
		CSRFToken string `json:"csrf_token"`
	}
	if resp := se.call("GET", "/console/api/session", "", nil, &who); resp.StatusCode != 200 || who.Name != "admin-1" || who.CSRFToken != se.csrf {
		t.Fatalf("GET session: %d %+v", resp.StatusCode, who)
	}
	body := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}
	for _, bad := range []string{"", "not-the-token"} {
		var e teststack.ErrorBody
		if resp := se.call("POST", "/push/broadcast?wait=0", bad, body, &e); resp.StatusCode != 403 || e.Error.Code != "csrf_failed" {
			t.Fatalf("POST with csrf %q: %d %+v", bad, resp.StatusCode, e)
		}
	}
	var n struct{ Broadcasts int64 }
	if s.Do("GET", "/push/stats", nil, &n); n.Broadcasts != 0 {
		t.Fatalf("a refused post stored %d broadcasts", n.Broadcasts)
	}
	var b teststack.Broadcast
	if resp := se.call("POST", "/push/broadcast?wait=0", se.csrf, body, &b); resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("POST with the csrf token: %d", resp.StatusCode)
	}
	if b.CreatedBy != "admin-1" {
		t.Fatalf("created_by %q: want the session's token name", b.CreatedBy)
	}
	if got := s.WaitFinished(b.ID, 30*time.Second); got.Succeeded != 5 {
		t.Fatalf("succeeded %d, want 5", got.Succeeded)
	}

	// A request the browser marks as from another site is refused even
	// with the right token.
	req, _ := http.NewRequest("POST", s.API.URL+"/push/broadcasts/"+fmt.Sprint(b.ID)+"/cancel", nil)
	req.AddCookie(c)
	req.Header.Set("X-CSRF-Token", se.csrf)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("cross-origin post: %d, want 403", resp.StatusCode)
	}

	// Sign-out needs the token, then ends the session on the server.
	if resp := se.call("DELETE", "/console/api/session", "", nil, nil); resp.StatusCode != 403 {
		t.Fatalf("sign-out without csrf: %d, want 403", resp.StatusCode)
	}
	resp = se.call("DELETE", "/console/api/session", se.csrf, nil, nil)
	if resp.StatusCode != 204 {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	cleared := false
	for _, ck := range resp.Cookies() {
		cleared = cleared || (ck.Name == "pushfan_session" && ck.MaxAge < 0)
	}
	if !cleared {
		t.Fatalf("sign-out did not clear the cookie: %v", resp.Header["Set-Cookie"])
	}
	// The old cookie, replayed, is dead everywhere.
	var after struct {
		SignedIn bool   `json:"signed_in"`
		CSRF     string `json:"csrf_token"`
	}
	if resp := se.call("GET", "/console/api/session", "", nil, &after); resp.StatusCode != 200 || after.SignedIn || after.CSRF != "" {
		t.Fatalf("GET session after sign-out: %d %+v, want signed_in false", resp.StatusCode, after)
	}
	if resp := se.call("GET", "/push/stats", "", nil, nil); resp.StatusCode != 401 {
		t.Fatalf("GET /push/stats after sign-out: %d, want 401", resp.StatusCode)
	}
	var count int
	if err := s.SQL.Get(&count, "SELECT COUNT(*) FROM console_sessions"); err != nil || count != 0 {
		t.Fatalf("sessions left after sign-out: %d %v", count, err)
	}
}

func TestConsoleViewerSessionCannotChange(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 3))
	se := signIn(t, s, viewerToken)
	if se.role != "viewer" {
		t.Fatalf("role %q", se.role)
	}
	var e teststack.ErrorBody
	body := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}
	if resp := se.call("POST", "/push/broadcast", se.csrf, body, &e); resp.StatusCode != 403 || e.Error.Code != "forbidden" {
		t.Fatalf("viewer POST with csrf: %d %+v", resp.StatusCode, e)
	}
	if resp := se.call("GET", "/push/stats", "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("viewer GET: %d", resp.StatusCode)
	}
	if got := s.Emu.Stats().Requests; got != 0 {
		t.Fatalf("the emulator received %d requests", got)
	}
	// A viewer may sign out (a DELETE of its own session).
	if resp := se.call("DELETE", "/console/api/session", se.csrf, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("viewer sign-out: %d", resp.StatusCode)
	}
}

// TestConsoleSessionEndsWithItsToken: a session belongs to the token's
// secret, not its name or place in PUSHFAN_ADMIN_TOKENS, so rotating or
// removing a token ends its sessions on every instance.
func TestConsoleSessionEndsWithItsToken(t *testing.T) {
	s := consoleStack(t, nil)
	se := signIn(t, s, viewerToken)
	// Another instance (the next deploy) has the viewer's secret rotated
	// under the same name, and a new token in the first place.
	next := s.AddInstanceWith(func(c *config.Config) {
		c.AdminTokens = []string{"new-secret-0123456789", teststack.AdminToken, "dashboard:viewer:rotated-secret-0123456789"}
	})
	same := &session{s: s, cookie: se.cookie}
	var who struct {
		SignedIn bool   `json:"signed_in"`
		Name     string `json:"name"`
	}
	if resp := same.call("GET", "/console/api/session", "", nil, &who); resp.StatusCode != 200 || !who.SignedIn || who.Name != "dashboard" {
		t.Fatalf("on the first instance: %d %+v", resp.StatusCode, who)
	}
	req, _ := http.NewRequest("GET", next.API.URL+"/console/api/session", nil)
	req.AddCookie(se.cookie)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, readAll(t, resp), &who)
	resp.Body.Close()
	if who.SignedIn {
		t.Fatalf("after the viewer's secret was rotated, its session still signs in as %q", who.Name)
	}
}

// TestConsoleParallelGuessesAreLimited: every attempt is charged before
// the token is checked, so a burst of parallel guesses gets the budget
// and no more.
func TestConsoleParallelGuessesAreLimited(t *testing.T) {
	s := consoleStack(t, func(c *config.Config) { c.HTTP.SignInFailuresPerMinute = 3 })
	var wg sync.WaitGroup
	codes := make([]int, 12)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", s.API.URL+"/console/api/session", strings.NewReader(fmt.Sprintf(`{"token":"guess-%d"}`, i)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	n := map[int]int{}
	for _, c := range codes {
		n[c]++
	}
	if n[401] != 3 || n[429] != 9 {
		t.Fatalf("12 parallel guesses with a budget of 3: %v, want 3 × 401 and 9 × 429", n)
	}
}

func TestConsoleSignInRefusesFormsAndOtherSites(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, nil)
	for _, c := range []struct {
		contentType, site string
		status            int
		code              string
	}{
		{"text/plain", "", 400, "invalid_content_type"},
		{"application/x-www-form-urlencoded", "", 400, "invalid_content_type"},
		{"application/json", "cross-site", 403, "csrf_failed"},
		{"application/json", "same-site", 403, "csrf_failed"},
	} {
		req, _ := http.NewRequest("POST", s.API.URL+"/console/api/session", strings.NewReader(`{"token":"`+teststack.AdminToken+`"}`))
		req.Header.Set("Content-Type", c.contentType)
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		resp, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e teststack.ErrorBody
		decode(t, readAll(t, resp), &e)
		resp.Body.Close()
		if resp.StatusCode != c.status || e.Error.Code != c.code || len(resp.Cookies()) != 0 {
			t.Errorf("%s from %q: %d %+v, cookies %v; want %d %s and no cookie", c.contentType, c.site, resp.StatusCode, e, resp.Cookies(), c.status, c.code)
		}
	}
}

func TestConsoleSignInFailuresAreLimited(t *testing.T) {
	s := consoleStack(t, func(c *config.Config) { c.HTTP.SignInFailuresPerMinute = 3 })
	anon := &session{s: s}
	for i := range 3 {
		var e teststack.ErrorBody
		if resp := anon.call("POST", "/console/api/session", "", map[string]string{"token": "guess-" + fmt.Sprint(i)}, &e); resp.StatusCode != 401 || e.Error.Field != "token" {
			t.Fatalf("guess %d: %d %+v", i, resp.StatusCode, e)
		}
	}
	var e teststack.ErrorBody
	resp := anon.call("POST", "/console/api/session", "", map[string]string{"token": teststack.AdminToken}, &e)
	if resp.StatusCode != 429 || e.Error.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("after 3 failures even the right token: %d %+v (Retry-After %q), want 429", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	if resp := anon.call("POST", "/console/api/session", "", map[string]string{}, &e); resp.StatusCode != 429 {
		t.Fatalf("limited address, empty body: %d", resp.StatusCode)
	}
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM console_sessions"); err != nil || n != 0 {
		t.Fatalf("sessions: %d %v", n, err)
	}
}

func TestConsoleAssetsAndRedirect(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, nil)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(s.API.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = http.Get(s.API.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<html") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("GET /console/: %d, CSP %q, page %.80q", resp.StatusCode, csp, page)
	}
	resp, err = http.Get(s.API.URL + "/console/no-such-file.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("missing file: %d", resp.StatusCode)
	}
}

func TestPreviewCountsAnyAudience(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, nil)
	pop := s.SeedPopulation(300)
	eligible := pop.Eligible()
	var p struct {
		Count  int64    `json:"count"`
		Users  int64    `json:"users"`
		Sample []uint64 `json:"sample_user_ids"`
	}
	users := map[uint64]int64{}
	for _, tk := range eligible {
		users[tk.UserID]++
	}
	// Users are counted once however many devices they have.
	if resp := s.Do("POST", "/push/preview", map[string]any{"audience": map[string]any{"all": true}}, &p); resp.StatusCode != 200 || p.Count != int64(len(eligible)) || p.Users != int64(len(users)) || len(p.Sample) != 10 {
		t.Fatalf("all: %d count %d (want %d), users %d (want %d), sample %v", resp.StatusCode, p.Count, len(eligible), p.Users, len(users), p.Sample)
	}
	if int64(len(users)) == p.Count {
		t.Fatal("every seeded user has one device: the users count is not told apart from the devices")
	}
	var ids []uint64
	var want int64
	for id, n := range users {
		if len(ids) < 5 {
			ids = append(ids, id)
			want += n
		}
	}
	if resp := s.Do("POST", "/push/preview", map[string]any{"audience": map[string]any{"user_ids": ids}}, &p); resp.StatusCode != 200 || p.Count != want || p.Users != int64(len(ids)) || len(p.Sample) != len(ids) {
		t.Fatalf("user_ids %v: %d count %d (want %d), users %d, sample %v", ids, resp.StatusCode, p.Count, want, p.Users, p.Sample)
	}
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{"audience": map[string]any{"user_ids": []int{0}}}, "audience.user_ids"},
		{map[string]any{"audience": map[string]any{"all": true, "user_ids": []int{1}}}, "audience"},
		{map[string]any{"audience": map[string]any{"name": "nope"}}, "audience.name"},
		{map[string]any{}, "audience"},
		{map[string]any{"audience": map[string]any{"all": true}, "extra": 1}, "extra"},
	} {
		var e teststack.ErrorBody
		if resp := s.Do("POST", "/push/preview", c.body, &e); resp.StatusCode != 400 || e.Error.Field != c.field {
			t.Errorf("%v: %d %+v, want 400 naming %s", c.body, resp.StatusCode, e, c.field)
		}
	}
	var n struct{ Broadcasts, DryRuns int64 }
	if s.Do("GET", "/push/stats", nil, &n); n.Broadcasts+n.DryRuns != 0 || s.Emu.Stats().Requests != 0 {
		t.Fatalf("a preview stored or sent something: %+v, %d requests", n, s.Emu.Stats().Requests)
	}
}

// readEvents reads server-sent "state" events from resp until the stream
// ends, calling fn with each event's data.
func readEvents(t *testing.T, resp *http.Response, fn func(data []byte)) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "state":
			fn([]byte(strings.TrimPrefix(line, "data: ")))
		case line == "":
			event = ""
		}
	}
}

func TestWatchStreamFollowsABroadcastToItsEnd(t *testing.T) {
	// A read timeout shorter than the broadcast: the stream must outlive it.
	s := consoleStack(t, func(c *config.Config) {
		c.HTTP.BroadcastCache = 250 * time.Millisecond
		c.HTTP.ReadTimeout, c.HTTP.ReadHeaderTimeout = time.Second, time.Second
	})
	s.SeedTokens(1, tokens("ok-", 400))
	// Paced so the stream has several ticks to show.
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, "max_rate": 100}, &b); resp.StatusCode != 202 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	se := signIn(t, s, viewerToken)
	const viewers = 5
	type seen struct {
		events   int
		last     teststack.Broadcast
		maxRate  float64
		seriesOK bool
	}
	results := make([]seen, viewers)
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for i := range viewers {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/push/broadcasts/%d/events", s.API.URL, b.ID), nil)
		req.AddCookie(se.cookie) // a viewer session may watch
		client := &http.Client{Timeout: time.Until(deadline)}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			readEvents(t, resp, func(data []byte) {
				var ev struct {
					Broadcast teststack.Broadcast `json:"broadcast"`
					Series    []struct {
						PerSecond float64 `json:"per_second"`
					} `json:"series"`
				}
				if err := json.Unmarshal(data, &ev); err != nil {
					t.Errorf("event %q: %v", data, err)
					return
				}
				r := &results[i]
				r.events++
				r.last = ev.Broadcast
				for _, p := range ev.Series {
					r.maxRate = max(r.maxRate, p.PerSecond)
				}
				r.seriesOK = r.seriesOK || len(ev.Series) > 0
			})
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		t.Fatal("the event streams did not end within 60 s of the broadcast's start")
	}
	for i, r := range results {
		if r.last.Status != "completed" || r.last.Succeeded != 400 || r.events < 3 || !r.seriesOK || r.maxRate <= 0 || r.maxRate > 200 {
			t.Errorf("viewer %d: %d events, last %s %d succeeded, series %v max %.0f/s; want the final state (400 succeeded) after several, a rate near 100/s",
				i, r.events, r.last.Status, r.last.Succeeded, r.seriesOK, r.maxRate)
		}
	}
	if got := s.Emu.Stats().Requests; got != 400 {
		t.Fatalf("emulator received %d, want 400", got)
	}
	// A finished broadcast's stream answers its state once and ends.
	resp := se.call("GET", fmt.Sprintf("/push/broadcasts/%d/events", b.ID), "", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("stream of a finished broadcast: %d", resp.StatusCode)
	}
	if resp := se.call("GET", "/push/broadcasts/999999/events", "", nil, nil); resp.StatusCode != 404 {
		t.Fatalf("stream of an unknown broadcast: %d", resp.StatusCode)
	}
}

func TestClusterShowsTheBudgetAndRunningChunks(t *testing.T) {
	s := consoleStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 300))
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, "max_rate": 50}, &b); resp.StatusCode != 202 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	type cluster struct {
		Limit   float64 `json:"limit_per_second"`
		Members []struct {
			Instance string   `json:"instance"`
			Sending  bool     `json:"sending"`
			Demand   *float64 `json:"demand_per_second"`
			Share    float64  `json:"share_per_second"`
			Self     bool     `json:"self"`
		} `json:"members"`
		Chunks []struct {
			BroadcastID uint64 `json:"broadcast_id"`
			Class       string `json:"class"`
			Owner       string `json:"owner"`
		} `json:"chunks"`
	}
	var c cluster
	teststack.WaitEvery(t, "the cluster view to show this instance sending broadcast's chunk at its pace", 20*time.Second, 100*time.Millisecond, func() bool {
		c = cluster{}
		if resp := s.Do("GET", "/push/cluster", nil, &c); resp.StatusCode != 200 {
			t.Fatalf("cluster: %d", resp.StatusCode)
		}
		return len(c.Members) == 1 && c.Members[0].Sending && c.Members[0].Self && c.Members[0].Demand != nil &&
			len(c.Chunks) > 0 && c.Chunks[0].BroadcastID == b.ID
	})
	m := c.Members[0]
	if c.Limit != s.Config.Engine.RateLimit || m.Share < 50 || m.Share > 60 || c.Chunks[0].Class != "paced" || c.Chunks[0].Owner != s.Service.Owner() {
		t.Fatalf("cluster %+v: want limit %v, a share of about the pace (50/s × 1.05), the paced chunk owned by %s", c, s.Config.Engine.RateLimit, s.Service.Owner())
	}
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
}

// TestWatchStreamEndsAtSignOut: a console session's open streams end when
// it signs out, not at the session's expiry.
func TestWatchStreamEndsAtSignOut(t *testing.T) {
	s := consoleStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 200))
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, "max_rate": 5}, &b); resp.StatusCode != 202 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	defer s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
	se := signIn(t, s, viewerToken)
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/push/broadcasts/%d/events", s.API.URL, b.ID), nil)
	req.AddCookie(se.cookie)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan struct{}, 1)
	ended := make(chan int, 1)
	go func() {
		n := 0
		readEvents(t, resp, func([]byte) {
			if n++; n == 1 {
				first <- struct{}{}
			}
		})
		ended <- n
	}()
	teststack.Receive(t, "the stream's first event", 10*time.Second, first)
	if resp := se.call("DELETE", "/console/api/session", se.csrf, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	start := time.Now()
	teststack.Receive(t, "the stream to end after the sign-out", 5*time.Second, ended)
	t.Logf("the stream ended %v after the sign-out", time.Since(start).Round(time.Millisecond))
	var cur teststack.Broadcast
	// Not final (200 targets at 5/s take 40 s), so the stream ended for
	// the sign-out, not for the broadcast's end.
	if s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &cur); cur.Final() {
		t.Fatalf("the broadcast is %s: want it still unfinished", cur.Status)
	}
}

// The session cookie is Secure when the client used TLS: X-Forwarded-Proto
// says so only from a proxy in PUSHFAN_TRUSTED_PROXIES, since anyone can
// write the header.
func TestSessionCookieSecureOnlyBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	secure := func(s *teststack.Stack, proto string) bool {
		t.Helper()
		req, _ := http.NewRequest("POST", s.API.URL+"/console/api/session", strings.NewReader(`{"token":"`+teststack.AdminToken+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "pushfan_session" && resp.StatusCode == 200 {
				return c.Secure
			}
		}
		t.Fatalf("sign-in with X-Forwarded-Proto %q: %d, no session cookie", proto, resp.StatusCode)
		return false
	}
	direct := consoleStack(t, nil)
	if secure(direct, "https") {
		t.Error("an untrusted client's X-Forwarded-Proto: https made the cookie Secure")
	}
	if secure(direct, "") {
		t.Error("a plain HTTP sign-in got a Secure cookie")
	}
	proxied := consoleStack(t, func(c *config.Config) { c.HTTP.TrustedProxies = []string{"127.0.0.1/32"} })
	if !secure(proxied, "https") {
		t.Error("a trusted proxy's X-Forwarded-Proto: https did not make the cookie Secure")
	}
	if secure(proxied, "https, http") || secure(proxied, "") {
		t.Error("the cookie is Secure though the trusted proxy says (last) http, or nothing")
	}
}

// otherSender is a second sender token for the preview tests.
const otherSender = "second-sender-token-0123456789"

type previewAnswer struct {
	Count  int64    `json:"count"`
	Sample []uint64 `json:"sample_user_ids"`
}

// A preview's count is kept for PUSHFAN_PREVIEW_CACHE and shared by every
// caller of the instance: the console counts as the operator types, and a
// count of a large audience reads all of it.
func TestPreviewCountsAreCachedForEveryCaller(t *testing.T) {
	t.Parallel()
	s := consoleStack(t, func(c *config.Config) {
		c.AdminTokens = append(c.AdminTokens, "second:sender:"+otherSender)
		c.HTTP.PreviewCache = 10 * time.Minute
	})
	s.SeedTokens(1, tokens("ok-", 30))
	all := map[string]any{"audience": map[string]any{"all": true}}
	var p previewAnswer
	if resp := s.Do("POST", "/push/preview", all, &p); resp.StatusCode != 200 || p.Count != 30 || len(p.Sample) != 10 {
		t.Fatalf("first preview: %d %+v", resp.StatusCode, p)
	}
	s.SeedTokens(31, tokens("more-", 20))
	var again previewAnswer
	if resp := s.DoAuth("POST", "/push/preview", otherSender, all, &again); resp.StatusCode != 200 || again.Count != 30 || !slices.Equal(again.Sample, p.Sample) {
		t.Fatalf("the same audience again, from another token: %d %+v, want the first count, 30 (cached)", resp.StatusCode, again)
	}
	// Another audience is counted afresh.
	ids := map[string]any{"audience": map[string]any{"user_ids": []int{31, 32, 33, 1}}}
	if resp := s.Do("POST", "/push/preview", ids, &p); resp.StatusCode != 200 || p.Count != 4 {
		t.Fatalf("user ids 31-33 and 1: %d %+v, want 4", resp.StatusCode, p)
	}
	// A broadcast counts the live audience, whatever a preview saw.
	var b teststack.Broadcast
	if s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b); b.Targeted != 50 {
		t.Fatalf("broadcast targeted %d, want 50", b.Targeted)
	}
}

// Previews are limited per token (PUSHFAN_PREVIEWS_PER_MINUTE, burst ten
// seconds' worth), both routes together, with the 429 of the other limits.
func TestPreviewsAreRateLimitedPerToken(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken, "second:sender:" + otherSender}
		c.HTTP.PreviewsPerMinute = 1 // a burst of 1, then one a minute
		c.Audiences = []audience.Definition{{Name: "low_ids", Params: map[string]string{"max_user": "int"},
			SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.user_id <= :max_user ORDER BY t.id LIMIT :limit"}}
	}})
	s.SeedTokens(1, tokens("ok-", 5))
	if resp := s.Do("POST", "/push/preview", map[string]any{"audience": map[string]any{"user_ids": []int{1}}}, nil); resp.StatusCode != 200 {
		t.Fatalf("first preview: %d", resp.StatusCode)
	}
	for _, path := range []string{"/push/preview", "/push/audiences/low_ids/preview"} {
		body := map[string]any{"audience": map[string]any{"all": true}}
		if path != "/push/preview" {
			body = map[string]any{"params": map[string]any{"max_user": 3}}
		}
		var e teststack.ErrorBody
		resp := s.Do("POST", path, body, &e)
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 429 || e.Error.Code != "rate_limited" || err != nil || secs < 1 || secs > 60 {
			t.Fatalf("%s over the budget: %d %+v Retry-After %q", path, resp.StatusCode, e, resp.Header.Get("Retry-After"))
		}
	}
	var p previewAnswer
	if resp := s.DoAuth("POST", "/push/audiences/low_ids/preview", otherSender, map[string]any{"params": map[string]any{"max_user": 3}}, &p); resp.StatusCode != 200 || p.Count != 3 {
		t.Fatalf("another token's preview: %d %+v", resp.StatusCode, p)
	}
}
