package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const metricsToken = "metrics-scraper-token-0123456789"

// authStack trusts the loopback proxy, so a test names each request's
// client address in X-Forwarded-For: an attacker's and a bystander's.
func authStack(t *testing.T, failuresPerMinute float64) *teststack.Stack {
	return teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken, "dashboard:viewer:" + viewerToken}
		c.InternalToken = internalToken
		c.MetricsToken = metricsToken
		c.HTTP.SignInFailuresPerMinute = failuresPerMinute
		c.HTTP.TrustedProxies = []string{"127.0.0.1/32"}
	}})
}

// answer is one exchange's status, error body and Retry-After.
type answer struct {
	status     int
	code       string
	retryAfter string
}

// from sends a request as the client at addr: a bearer token when token is
// not "", or a sign-in when path is the session route.
func from(t *testing.T, s *teststack.Stack, addr, method, path, token, body string) answer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.API.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", addr)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var e teststack.ErrorBody
	if raw := readAll(t, resp); resp.StatusCode >= 400 {
		decode(t, raw, &e)
	}
	return answer{status: resp.StatusCode, code: e.Error.Code, retryAfter: resp.Header.Get("Retry-After")}
}

func signInBody(token string) string { return fmt.Sprintf(`{"token":%q}`, token) }

// Wrong bearer tokens on GET routes and failed sign-ins spend one budget
// per client address; once it is spent, every way in refuses the address
// with a 429, the right tokens too, while another address is not affected.
func TestBearerGuessesShareTheSignInBudget(t *testing.T) {
	const attacker, bystander = "203.0.113.7", "198.51.100.9"
	s := authStack(t, 3)
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/push/stats", "guess-0123456789-a", ""},
		{"GET", "/push/broadcasts/1", "guess-0123456789-b", ""},
		{"POST", "/console/api/session", "", signInBody("guess-0123456789-c")},
	} {
		if a := from(t, s, attacker, c.method, c.path, c.token, c.body); a.status != 401 || a.code != "unauthorized" {
			t.Fatalf("guess %s %s: %+v, want 401", c.method, c.path, a)
		}
	}
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/push/stats", teststack.AdminToken, ""},
		{"GET", "/push/broadcasts", viewerToken, ""},
		{"GET", "/metrics", metricsToken, ""},
		{"POST", "/internal/cron/nope", internalToken, ""},
		{"POST", "/console/api/session", "", signInBody(teststack.AdminToken)},
		{"GET", "/push/cron", "guess-0123456789-d", ""},
	} {
		a := from(t, s, attacker, c.method, c.path, c.token, c.body)
		secs, err := strconv.Atoi(a.retryAfter)
		if a.status != 429 || a.code != "rate_limited" || err != nil || secs < 1 || secs > 20 {
			t.Errorf("spent budget, %s %s: %+v, want 429 rate_limited with Retry-After within 20 s", c.method, c.path, a)
		}
	}
	if a := from(t, s, bystander, "GET", "/push/stats", teststack.AdminToken, ""); a.status != 200 {
		t.Fatalf("another address: %+v, want 200", a)
	}
	if a := from(t, s, bystander, "GET", "/metrics", metricsToken, ""); a.status != 200 {
		t.Fatalf("another address's scrape: %+v, want 200", a)
	}
}

// A success costs nothing and gives nothing back: with a budget of 3,
// twenty requests with the right token and four sign-ins all pass, and
// two failures, a success and one more failure spend the budget.
func TestAuthenticationSuccessCostsNothingAndRefundsNothing(t *testing.T) {
	const addr = "203.0.113.20"
	s := authStack(t, 3)
	for i := range 20 {
		if a := from(t, s, addr, "GET", "/push/stats", teststack.AdminToken, ""); a.status != 200 {
			t.Fatalf("right token %d: %+v", i, a)
		}
	}
	for i := range 4 {
		if a := from(t, s, addr, "POST", "/console/api/session", "", signInBody(teststack.AdminToken)); a.status != 200 {
			t.Fatalf("sign-in %d with the right token: %+v (a success must cost nothing)", i, a)
		}
	}
	for i, token := range []string{"guess-0123456789-a", "guess-0123456789-b", teststack.AdminToken, "guess-0123456789-c"} {
		want := 401
		if token == teststack.AdminToken {
			want = 200
		}
		if a := from(t, s, addr, "GET", "/push/stats", token, ""); a.status != want {
			t.Fatalf("attempt %d: %+v, want %d", i, a, want)
		}
	}
	if a := from(t, s, addr, "GET", "/push/stats", teststack.AdminToken, ""); a.status != 429 {
		t.Fatalf("three failures around a success: %+v, want 429 (the success refunds nothing)", a)
	}
}

// Parallel wrong bearer tokens get the budget and no more: each is charged
// in one step with the check.
func TestParallelBearerGuessesAreLimited(t *testing.T) {
	s := authStack(t, 3)
	var wg sync.WaitGroup
	got := make([]answer, 12)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = from(t, s, "203.0.113.30", "GET", "/push/stats", fmt.Sprintf("guess-0123456789-%d", i), "")
		}()
	}
	wg.Wait()
	n := map[int]int{}
	for _, a := range got {
		n[a.status]++
	}
	if n[401] != 3 || n[429] != 9 {
		t.Fatalf("12 parallel guesses with a budget of 3: %v, want 3 × 401 and 9 × 429", n)
	}
}
