package server_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const (
	viewerToken = "viewer-secret-0123456789"
	hashedToken = "hashed-secret-0123456789"
)

func securityStack(t *testing.T, perMinute float64) *teststack.Stack {
	sum := sha256.Sum256([]byte(hashedToken))
	return teststack.New(t, teststack.Options{CaptureLogs: true, Configure: func(c *config.Config) {
		c.AdminTokens = []string{
			teststack.AdminToken,
			"dashboard:viewer:" + viewerToken,
			"ci-bot:sender:sha256:" + hex.EncodeToString(sum[:]),
		}
		if perMinute > 0 {
			c.HTTP.SubmitPerMinute = perMinute
		}
		// The tests send wrong tokens on purpose; the failure budget
		// has tests of its own (authfailures_test.go).
		c.HTTP.SignInFailuresPerMinute = 1000
	}})
}

func TestRolesAndHashedTokens(t *testing.T) {
	t.Parallel()
	s := securityStack(t, 0)
	s.SeedTokens(1, tokens("ok-", 20))
	routes := []struct{ method, path string }{
		{"POST", "/push/broadcast"}, {"GET", "/push/broadcasts/1"}, {"POST", "/push/broadcasts/1/cancel"},
		{"GET", "/push/broadcasts/1/failures"}, {"GET", "/push/stats"},
	}
	for _, r := range routes {
		for _, tok := range []string{"", "wrong-token-0123456789"} {
			var e teststack.ErrorBody
			if resp := s.DoAuth(r.method, r.path, tok, `{}`, &e); resp.StatusCode != 401 || e.Error.Code != "unauthorized" {
				t.Fatalf("%s %s with token %q: %d %+v", r.method, r.path, tok, resp.StatusCode, e)
			}
		}
	}
	body := map[string]any{"title": "x", "audience": map[string]any{"all": true}}
	var e teststack.ErrorBody
	if resp := s.DoAuth("POST", "/push/broadcast", viewerToken, body, &e); resp.StatusCode != 403 || e.Error.Code != "forbidden" {
		t.Fatalf("viewer POST: %d %+v", resp.StatusCode, e)
	}
	var b struct {
		ID        uint64 `json:"id"`
		Status    string `json:"status"`
		CreatedBy string `json:"created_by"`
	}
	if resp := s.DoAuth("POST", "/push/broadcast", hashedToken, body, &b); resp.StatusCode != 200 || b.CreatedBy != "ci-bot" {
		t.Fatalf("hashed token POST: %d %+v", resp.StatusCode, b)
	}
	var got struct {
		CreatedBy string `json:"created_by"`
	}
	if resp := s.DoAuth("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), viewerToken, nil, &got); resp.StatusCode != 200 || got.CreatedBy != "ci-bot" {
		t.Fatalf("viewer GET: %d created_by %q", resp.StatusCode, got.CreatedBy)
	}
	s.Do("POST", "/push/broadcast", body, &b)
	if b.CreatedBy != "admin-1" {
		t.Fatalf("a bare token is named admin-1, got %q", b.CreatedBy)
	}
}

func TestSubmitRateLimitPerToken(t *testing.T) {
	s := securityStack(t, 6) // 6 per minute: a burst of 1, then one every 10 s
	s.SeedTokens(1, tokens("ok-", 5))
	body := map[string]any{"title": "x", "audience": map[string]any{"all": true}}
	if resp := s.Do("POST", "/push/broadcast", body, nil); resp.StatusCode != 200 {
		t.Fatalf("first submit: %d", resp.StatusCode)
	}
	var e teststack.ErrorBody
	resp := s.Do("POST", "/push/broadcast", body, &e)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != "rate_limited" || err != nil || secs < 1 || secs > 10 {
		t.Fatalf("second submit: %d %+v Retry-After %q", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
	// The limit is per token: another sender is not affected.
	if resp := s.DoAuth("POST", "/push/broadcast", hashedToken, body, nil); resp.StatusCode != 200 {
		t.Fatalf("other token: %d", resp.StatusCode)
	}
}

func TestMetricsEqualTheBroadcastCounts(t *testing.T) {
	s := securityStack(t, 0)
	pop := s.SeedPopulation(400)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if b.Failed == 0 || b.Succeeded == 0 {
		t.Fatalf("broadcast %+v proves nothing", b)
	}
	// The answer can be written as the broadcast is final, a moment before
	// the instance that finished it counts it in the metrics.
	var m map[string]float64
	waitUntil(t, "the finished broadcast in the metrics", 10*time.Second, func() bool {
		m = scrape(t, s.HTTP, s.API.URL+"/metrics", viewerToken)
		return m[`pushfan_broadcasts_finished_total{app="default",status="completed",trigger="api"}`] == 1
	})
	if got := m[`pushfan_broadcast_targets_total{app="default",code="OK",result="succeeded"}`]; got != float64(b.Succeeded) {
		t.Fatalf("succeeded metric %v, broadcast %d", got, b.Succeeded)
	}
	for code, n := range b.Errors {
		if got := m[fmt.Sprintf(`pushfan_broadcast_targets_total{app="default",code=%q,result="failed"}`, code)]; got != float64(n) {
			t.Fatalf("failed %s metric %v, broadcast %d", code, got, n)
		}
	}
	if got := m[`pushfan_fcm_send_attempts_total{app="default",code="OK",outcome="success"}`]; got != float64(s.Emu.Stats().Accepted) {
		t.Fatalf("send attempts OK %v, emulator accepted %d", got, s.Emu.Stats().Accepted)
	}
	if got := m[`pushfan_tokens_invalidated_total`]; got != float64(b.InvalidatedTokens) {
		t.Fatalf("invalidated metric %v, broadcast %d", got, b.InvalidatedTokens)
	}
	if m[`pushfan_broadcasts_finished_total{app="default",status="completed",trigger="api"}`] != 1 || m[`pushfan_fcm_send_duration_seconds_count{app="default"}`] == 0 ||
		m[`go_sql_max_open_connections{db_name="pushfan"}`] == 0 || m["go_goroutines"] == 0 {
		t.Fatal("broadcast, latency, database pool or runtime metrics missing")
	}

	// Logs: lines about the broadcast carry its id, worker lines carry the
	// request id, and no device token appears whole.
	logs := s.LogText()
	var sawFailure bool
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"send failed"`) {
			sawFailure = true
			if !strings.Contains(line, fmt.Sprintf(`"broadcast_id":%d`, b.ID)) || !strings.Contains(line, `"request_id"`) {
				t.Fatalf("worker line without ids: %s", line)
			}
		}
	}
	if !sawFailure {
		t.Fatal("no worker line captured")
	}
	for _, tk := range pop.Tokens {
		if strings.Contains(logs, `"`+tk.Token+`"`) {
			t.Fatalf("token %s appears whole in the logs", tk.Token)
		}
	}
	if strings.Contains(logs, teststack.AdminToken) || strings.Contains(logs, viewerToken) {
		t.Fatal("an admin token appears in the logs")
	}
}

// scrape reads a Prometheus text exposition into name{labels} → value,
// sending token as a bearer ("" sends none).
func scrape(t *testing.T, client *http.Client, url, token string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// GET /metrics is not public: on the API's listener it takes the metrics
// token or an admin token, and the metrics token opens nothing else.
// PUSHFAN_METRICS_ADDR serves it on a listener of its own, without a token
// unless PUSHFAN_METRICS_TOKEN is set.
func TestMetricsNeedAToken(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken, "dashboard:viewer:" + viewerToken}
		c.MetricsToken = metricsToken
		c.HTTP.SignInFailuresPerMinute = 1000
	}})
	var e teststack.ErrorBody
	resp := s.DoAuth("GET", "/metrics", "", nil, &e)
	if resp.StatusCode != 401 || e.Error.Code != "unauthorized" || resp.Header.Get("WWW-Authenticate") != `Bearer realm="pushfan-metrics"` {
		t.Fatalf("GET /metrics without a token: %d %+v %q", resp.StatusCode, e, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := s.DoAuth("GET", "/metrics", "wrong-token-0123456789", nil, &e); resp.StatusCode != 401 {
		t.Fatalf("GET /metrics with a wrong token: %d", resp.StatusCode)
	}
	for _, tok := range []string{metricsToken, viewerToken, teststack.AdminToken} {
		if m := scrape(t, s.HTTP, s.API.URL+"/metrics", tok); m["go_goroutines"] == 0 {
			t.Fatalf("scrape with %s: no go_goroutines", tok)
		}
	}
	for _, path := range []string{"/push/stats", "/push/broadcasts"} {
		if resp := s.DoAuth("GET", path, metricsToken, nil, &e); resp.StatusCode != 401 {
			t.Fatalf("the metrics token on GET %s: %d, want 401", path, resp.StatusCode)
		}
	}
	if srv := s.First.App.API.MetricsServer(); srv != nil {
		t.Fatalf("a metrics listener without PUSHFAN_METRICS_ADDR: %s", srv.Addr)
	}

	// Without a metrics token, an admin token still reads them; no one else.
	plain := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.MetricsAddr = "127.0.0.1:0" }})
	if resp := plain.DoAuth("GET", "/metrics", "", nil, &e); resp.StatusCode != 401 {
		t.Fatalf("no metrics token, GET /metrics without a token: %d", resp.StatusCode)
	}
	scrape(t, plain.HTTP, plain.API.URL+"/metrics", teststack.AdminToken)
	// The listener of its own needs no token when none is set...
	own := metricsListener(t, plain)
	if m := scrape(t, http.DefaultClient, own+"/metrics", ""); m["go_goroutines"] == 0 {
		t.Fatal("the metrics listener: no go_goroutines")
	}
	// ... nor do Go's profiles there, which the API's listener never serves...
	if code := getStatus(t, own+"/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Fatalf("the metrics listener's goroutine profile: %d, want 200", code)
	}
	if resp := plain.DoAuth("GET", "/debug/pprof/goroutine?debug=1", teststack.AdminToken, nil, &e); resp.StatusCode != 404 {
		t.Fatalf("the API listener served a profile to an admin: %d, want 404", resp.StatusCode)
	}
	// ... and it serves nothing else.
	if code := getStatus(t, own+"/push/stats"); code != 404 {
		t.Fatalf("the metrics listener answered GET /push/stats with %d, want 404", code)
	}
	// With a token set, it takes the token there too.
	guarded := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.MetricsToken = metricsToken
	}})
	own = metricsListener(t, guarded)
	for _, path := range []string{"/metrics", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if code := getStatus(t, own+path); code != 401 {
			t.Fatalf("the guarded metrics listener without a token, GET %s: %d, want 401", path, code)
		}
	}
	scrape(t, http.DefaultClient, own+"/metrics", metricsToken)
}

// metricsListener serves the stack's PUSHFAN_METRICS_ADDR server on a
// loopback port and returns its base URL.
func metricsListener(t *testing.T, s *teststack.Stack) string {
	t.Helper()
	srv := s.First.App.API.MetricsServer()
	if srv == nil {
		t.Fatal("no metrics server though PUSHFAN_METRICS_ADDR is set")
	}
	ts := httptest.NewUnstartedServer(srv.Handler)
	ts.Config = srv
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// getStatus is the status of a GET without a token.
func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
