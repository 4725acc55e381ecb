package main

// The stack of the several-apps tests (issue 27, docs/apps.md): one
// database, one in-process emulator per app, each behind a log of the
// project path every token was sent under, and `pushfan serve` processes
// configured with an apps: section naming them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/apiclient"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// appsToken is the stacks' admin token, of every app; scopedSecret one
// limited to the first app of a stack (name:role:secret:app).
const (
	appsToken    = "apps-test-admin-token-0123456"
	scopedSecret = "apps-test-scoped-token-0123"
)

// projectLog is an emulator with a log of what reached it: for each
// token, the sends accepted under each project path
// (/v1/projects/<id>/messages:send), and every request's project.
type projectLog struct {
	emu *fcmemu.Emulator
	srv *httptest.Server

	mu       sync.Mutex
	accepted map[string]map[string]int // token → project → 2xx answers
	requests map[string]int            // project → requests
	times    []time.Time               // when each 2xx answer was given, in order
}

func newProjectLog(t *testing.T, cfg fcmemu.Config) *projectLog {
	if cfg.Latency == 0 {
		cfg.Latency, cfg.Jitter = 30*time.Millisecond, 5*time.Millisecond
	}
	l := &projectLog{
		emu:      fcmemu.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))),
		accepted: map[string]map[string]int{},
		requests: map[string]int{},
	}
	l.srv = httptest.NewServer(l)
	t.Cleanup(l.srv.Close)
	return l
}

// endpoint is the FCM endpoint an app names to send here.
func (l *projectLog) endpoint() string { return l.srv.URL + "/v1" }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ServeHTTP hands the request to the emulator and logs its project and
// token with the answer.
func (l *projectLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, underV1 := strings.CutPrefix(r.URL.Path, "/v1/projects/")
	project, isSend := strings.CutSuffix(rest, "/messages:send")
	if !underV1 || !isSend || r.Method != http.MethodPost {
		l.emu.Handler().ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Message struct {
			Token string `json:"token"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &req) // a body the emulator refuses is logged without a token
	sw := &statusWriter{ResponseWriter: w}
	l.emu.Handler().ServeHTTP(sw, r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests[project]++
	if sw.status/100 == 2 {
		byProject := l.accepted[req.Message.Token]
		if byProject == nil {
			byProject = map[string]int{}
			l.accepted[req.Message.Token] = byProject
		}
		byProject[project]++
		l.times = append(l.times, time.Now())
	}
}

// acceptedTimes copies when each send was accepted, in order.
func (l *projectLog) acceptedTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.times)
}

// snapshot copies the log.
func (l *projectLog) snapshot() (accepted map[string]map[string]int, requests map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	accepted = make(map[string]map[string]int, len(l.accepted))
	for tok, m := range l.accepted {
		accepted[tok] = maps.Clone(m)
	}
	return accepted, maps.Clone(l.requests)
}

// total is the sends accepted, under any project.
func (l *projectLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.accepted {
		for _, c := range m {
			n += c
		}
	}
	return n
}

// appSpec is one app of a stack.
type appSpec struct {
	name, project string
	rateLimit     int
	emu           fcmemu.Config
	yaml          string // more of the app's keys, indented as its own
}

// appsStack is a database, an emulator per app (and a trap emulator at
// PUSHFAN_FCM_ENDPOINT that no app names: nothing may reach it), and the
// serve processes' environment.
type appsStack struct {
	t    *testing.T
	pool *sqlx.DB
	apps []appSpec
	emus map[string]*projectLog // by app name
	trap *projectLog
	env  []string
}

func newAppsStack(t *testing.T, apps []appSpec, extraEnv ...string) *appsStack {
	tdb := testdb.New(t)
	s := &appsStack{t: t, pool: tdb.SQL, apps: apps, emus: map[string]*projectLog{}, trap: newProjectLog(t, fcmemu.Config{})}
	var yaml strings.Builder
	yaml.WriteString("apps:\n")
	for _, a := range apps {
		l := newProjectLog(t, a.emu)
		s.emus[a.name] = l
		fmt.Fprintf(&yaml, "  - name: %s\n    project_id: %s\n    endpoint: %s\n    rate_limit: %d\n", a.name, a.project, l.endpoint(), a.rateLimit)
		yaml.WriteString(a.yaml)
	}
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = append(withoutPushfanEnv(),
		"PUSHFAN_MYSQL_DSN="+tdb.DSN,
		"PUSHFAN_CONFIG="+path,
		"PUSHFAN_FCM_ENDPOINT="+s.trap.endpoint(),
		"PUSHFAN_ADMIN_TOKENS="+appsToken+",scoped:approver:"+scopedSecret+":"+apps[0].name,
		"PUSHFAN_SUBMIT_PER_MINUTE=600",
		"PUSHFAN_LOG_FORMAT=text",
	)
	s.env = append(s.env, extraEnv...)
	return s
}

// seedTokens gives users 1..n (made when missing, push enabled) one token
// each of app, named prefix<user id>, and returns the tokens.
func (s *appsStack) seedTokens(app, prefix string, n int) []string {
	return seedAppTokens(s.t, s.pool, app, prefix, n)
}

func seedAppTokens(t *testing.T, pool *sqlx.DB, app, prefix string, n int) []string {
	t.Helper()
	const batch = 1000
	var toks []string
	for lo := 1; lo <= n; lo += batch {
		hi := min(lo+batch-1, n)
		var users, tokens strings.Builder
		var uargs, targs []any
		for uid := lo; uid <= hi; uid++ {
			if uid > lo {
				users.WriteString(",")
				tokens.WriteString(",")
			}
			tok := fmt.Sprintf("%s%d", prefix, uid)
			toks = append(toks, tok)
			users.WriteString("(?)")
			uargs = append(uargs, uid)
			if app == "" {
				tokens.WriteString("(?,?)")
				targs = append(targs, uid, tok)
			} else {
				tokens.WriteString("(?,?,?)")
				targs = append(targs, uid, tok, app)
			}
		}
		if _, err := pool.Exec("INSERT IGNORE INTO users (id) VALUES "+users.String(), uargs...); err != nil {
			t.Fatalf("seeding users: %v", err)
		}
		cols := "(user_id, token, app)"
		if app == "" { // a database from before apps
			cols = "(user_id, token)"
		}
		if _, err := pool.Exec("INSERT INTO device_tokens "+cols+" VALUES "+tokens.String(), targs...); err != nil {
			t.Fatalf("seeding tokens of app %q: %v", app, err)
		}
	}
	return toks
}

// start runs `pushfan serve` on the stack.
func (s *appsStack) start(name string) *teststack.Process {
	s.t.Helper()
	return teststack.StartServe(s.t, binary, name, append(append([]string{}, s.env...), "PUSHFAN_INSTANCE_ID="+name))
}

// appBroadcast is the broadcast object with its app.
type appBroadcast struct {
	apiclient.Broadcast
	App string `json:"app"`
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// do makes one API call with bearer token and returns the status and body.
func do(t *testing.T, base, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// doJSON is do, wanting status want and decoding the answer into out.
func doJSON(t *testing.T, base, token, method, path, body string, want int, out any) {
	t.Helper()
	status, raw := do(t, base, token, method, path, body)
	if status != want {
		t.Fatalf("%s %s %s: HTTP %d, want %d: %s", method, path, body, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
}

// submitApp submits a broadcast to every token of app (no "app" when app
// is empty) and returns it without waiting.
func submitApp(t *testing.T, p *teststack.Process, app, title string) appBroadcast {
	t.Helper()
	body := fmt.Sprintf(`{"title":%q,"audience":{"all":true}}`, title)
	if app != "" {
		body = fmt.Sprintf(`{"app":%q,"title":%q,"audience":{"all":true}}`, app, title)
	}
	var b appBroadcast
	status, raw := do(t, p.URL, appsToken, "POST", "/push/broadcast?wait=0", body)
	if status != http.StatusOK && status != http.StatusAccepted {
		t.Fatalf("POST /push/broadcast %s: HTTP %d: %s", body, status, raw)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("POST /push/broadcast: decoding %s: %v", raw, err)
	}
	if b.App != app && app != "" {
		t.Fatalf("POST /push/broadcast for app %q answered a broadcast of app %q: %s", app, b.App, raw)
	}
	return b
}

// getBroadcast reads broadcast id.
func getBroadcast(t *testing.T, p *teststack.Process, id uint64) appBroadcast {
	t.Helper()
	var b appBroadcast
	doJSON(t, p.URL, appsToken, "GET", fmt.Sprintf("/push/broadcasts/%d", id), "", http.StatusOK, &b)
	return b
}

// waitBroadcastEnd polls broadcast id until it ends, for up to within.
func waitBroadcastEnd(t *testing.T, p *teststack.Process, id uint64, within time.Duration) appBroadcast {
	t.Helper()
	var b appBroadcast
	teststack.WaitEvery(t, fmt.Sprintf("broadcast %d to end", id), within, 50*time.Millisecond, func() bool {
		b = getBroadcast(t, p, id)
		return b.Final()
	})
	return b
}

// checkOnlyTo checks, from the emulators' logs, that app's emulator
// accepted exactly the tokens of want, each times times, all under
// project and under no other project path; that no other app's emulator
// accepted any of them; and that the trap at PUSHFAN_FCM_ENDPOINT got
// nothing.
func (s *appsStack) checkOnlyTo(app, project string, want []string, times int) {
	s.t.Helper()
	accepted, requests := s.emus[app].snapshot()
	for _, tok := range want {
		if byProject := accepted[tok]; byProject[project] != times || len(byProject) != 1 {
			s.t.Fatalf("app %s: token %s accepted %v at its emulator, want %d under project %s only", app, tok, byProject, times, project)
		}
	}
	if len(accepted) != len(want) {
		wantSet := map[string]bool{}
		for _, tok := range want {
			wantSet[tok] = true
		}
		for tok, byProject := range accepted {
			if !wantSet[tok] {
				s.t.Fatalf("app %s's emulator accepted %d tokens, want its %d: %s (%v) is not one of them", app, len(accepted), len(want), tok, byProject)
			}
		}
	}
	for p, n := range requests {
		if p != project {
			s.t.Fatalf("app %s's emulator got %d requests under project %q; its project is %s", app, n, p, project)
		}
	}
	for name, l := range s.emus {
		if name == app {
			continue
		}
		acc, _ := l.snapshot()
		for _, tok := range want {
			if acc[tok] != nil {
				s.t.Fatalf("token %s of app %s reached app %s's emulator: %v", tok, app, name, acc[tok])
			}
		}
	}
	if _, reqs := s.trap.snapshot(); len(reqs) > 0 {
		s.t.Fatalf("PUSHFAN_FCM_ENDPOINT, which no app names, got requests %v", reqs)
	}
}

// metricSum adds up the values of metric's series on p whose labels
// include every one of labels (`app="x"`).
func metricSum(t *testing.T, p *teststack.Process, metric string, labels ...string) float64 {
	t.Helper()
	status, raw := do(t, p.URL, appsToken, "GET", "/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d", status)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != metric {
			continue
		}
		lbls, value, ok := strings.Cut(rest, "} ")
		if !ok || slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(","+lbls+",", ","+l+",") }) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(value, "%g", &v); err == nil {
			sum += v
		}
	}
	return sum
}

// withoutPushfanEnv is the environment without any PUSHFAN_ variable: a
// stack's processes run on the configuration the test gives them only.
func withoutPushfanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PUSHFAN_") })
}
