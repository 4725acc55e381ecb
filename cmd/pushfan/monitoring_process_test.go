package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// A real Prometheus (Debian's, scripts/ensure-prometheus.sh), on a free
// loopback port with a scrape interval of 1 s, scrapes a running pushfan
// (its /metrics, with the metrics token as a bearer) while it sends a
// broadcast, and loads the alert rules. Then, through Prometheus's HTTP
// API: every rule loaded and evaluated without error; every expression of
// the dashboard and the rules runs (Grafana's variables substituted);
// every series each names exists; and the sends panel's query, turned into
// a count over the whole run, is the emulator's accepted count within 2 %.
//
// The emulator's one 1-second 429 storm makes the 429 series exist; a
// webhook endpoint in the config makes its backlog and disabled gauges
// exist.
func TestDashboardAndRulesAgainstARealPrometheus(t *testing.T) {
	prom := monitoringTool(t, "PUSHFAN_PROMETHEUS", "prometheus")
	const (
		users        = 3000
		metricsToken = "monitoring-test-metrics-token-0123"
	)
	tdb := testdb.New(t)
	if _, _, err := demo.New(tdb.SQL, nil).SeedDemo(t.Context(), demo.SeedOptions{Users: users, TokensPerUserMax: 1}); err != nil {
		t.Fatal(err)
	}
	emu := fcmemu.New(fcmemu.Config{Latency: 5 * time.Millisecond, StormAfter: users / 3, StormFor: time.Second},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	emuSrv := httptest.NewServer(emu.Handler())
	t.Cleanup(emuSrv.Close)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hooks.Close)

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "pushfan.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(`webhooks:
  - name: crm
    url: %s/hooks
    secret: whsec_bW9uaXRvcmluZy10ZXN0LXNlY3JldC0wMTIzNDU2Nzg5
    events: [broadcast.finished]
webhook_allow_private: true
`, hooks.URL))
	p := teststack.StartServe(t, binary, "pushfan", append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+tdb.DSN,
		"PUSHFAN_FCM_ENDPOINT="+emuSrv.URL+"/v1",
		"PUSHFAN_FCM_PROJECT_ID=monitoring-test",
		"PUSHFAN_ADMIN_TOKENS="+procTokenMonitoring,
		"PUSHFAN_METRICS_TOKEN="+metricsToken,
		"PUSHFAN_RATE_LIMIT=1000", // a run of some seconds: several scrapes during the sends
		"PUSHFAN_CONFIG="+cfgPath,
		"PUSHFAN_LOG_FORMAT=text",
	))

	// Prometheus: its config, the token file, the rules, a data directory.
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "metrics-token")
	writeFile(t, tokenPath, metricsToken)
	promCfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promCfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: pushfan
    authorization:
      credentials_file: %q
    static_configs:
      - targets: [%q]
`, rules, tokenPath, strings.TrimPrefix(p.URL, "http://")))
	api := startPrometheus(t, prom, promCfg, filepath.Join(dir, "data"))
	started := time.Now()

	// The first scrape, before any send: the success counter's first sample is 0.
	teststack.WaitEvery(t, "Prometheus's first scrape of pushfan", 30*time.Second, 200*time.Millisecond, func() bool {
		return len(api.query(t, `up{job="pushfan"} == 1`, time.Time{})) == 1
	})

	var sub struct {
		ID uint64 `json:"id"`
	}
	monitoringCall(t, p.URL, "POST", "/push/broadcast?wait=0", `{"title":"monitoring test","audience":{"all":true}}`, &sub)
	teststack.WaitEvery(t, "the broadcast to finish", 45*time.Second, 200*time.Millisecond, func() bool {
		var b struct {
			Status string `json:"status"`
		}
		monitoringCall(t, p.URL, "GET", fmt.Sprintf("/push/broadcasts/%d", sub.ID), "", &b)
		return b.Status == "completed" || b.Status == "failed" || b.Status == "canceled"
	})
	accepted := emu.Stats().Accepted
	if accepted < users {
		t.Fatalf("the emulator accepted %d of %d", accepted, users)
	}

	// Wait until Prometheus has scraped the final count: the success
	// series equals what /metrics says now.
	final := scrapeSuccess(t, p.URL, metricsToken)
	teststack.WaitEvery(t, "Prometheus to scrape the final count", 15*time.Second, 200*time.Millisecond, func() bool {
		s := api.query(t, `pushfan_fcm_send_attempts_total{outcome="success"}`, time.Time{})
		return len(s) == 1 && s[0].value == final
	})
	// The scrape's own time (an instant query's result carries the
	// evaluation's): the sends panel is evaluated there.
	stamp := api.query(t, `timestamp(pushfan_fcm_send_attempts_total{outcome="success"})`, time.Time{})
	if len(stamp) != 1 {
		t.Fatalf("timestamp of the success series: %v", stamp)
	}
	last := stamp[0].value

	// Every rule loaded and evaluated (an expression that fails to run has health "err").
	teststack.WaitEvery(t, "every rule evaluated", 15*time.Second, 250*time.Millisecond, func() bool {
		n, bad := api.rules(t)
		if bad != "" {
			t.Fatalf("a rule does not evaluate: %s", bad)
		}
		return n == len(loadRules(t).Groups[0].Rules)
	})

	// The new series moved with the broadcast: checkpoints were timed, the
	// chunk was seen running, the storm's 429s were counted, the database
	// answered every scrape.
	for _, q := range []string{
		`sum(pushfan_checkpoint_duration_seconds_count) > 0`,
		`max_over_time(pushfan_chunks{state="running"}[5m]) > 0`,
		`sum(increase(pushfan_fcm_send_attempts_total{code="QUOTA_EXCEEDED"}[5m])) > 0`,
		`min_over_time(pushfan_database_up[5m]) == 1`,
	} {
		if len(api.query(t, q, time.Time{})) == 0 {
			t.Errorf("%s: empty", q)
		}
	}

	// Every expression runs, and every series it names exists.
	for _, e := range monitoringExprs(t) {
		api.query(t, substitute(e.expr, "1m"), time.Time{}) // fails the test on an error
		for _, sel := range selectors(substitute(e.expr, "1m")) {
			if n := api.series(t, sel, started.Add(-time.Minute)); n == 0 {
				t.Errorf("%s: no series %s in Prometheus (renamed, or never exported?)", e.where, sel)
			}
		}
	}

	// The sends panel: its rate over the whole run, times the window, is
	// the count of sends. Evaluated at the last sample's time, with the
	// series starting at 0, rate() extrapolates nothing.
	var sends string
	for _, pnl := range loadDashboard(t).Panels {
		if pnl.Title == sendsPanel {
			sends = pnl.Targets[0].Expr
		}
	}
	if sends == "" {
		t.Fatalf("the dashboard has no panel %q", sendsPanel)
	}
	window := int(math.Ceil(last-float64(started.Unix()))) + 30
	var counted float64
	for _, s := range api.query(t, substitute(sends, strconv.Itoa(window)+"s"), time.UnixMilli(int64(last*1000))) {
		if s.metric["outcome"] == "success" && s.metric["app"] == "default" {
			counted += s.value * float64(window)
		}
	}
	t.Logf("sends panel: %.1f sends over %d s; the emulator accepted %d; 429 storm answers %d", counted, window, accepted, emu.Stats().Requests-emu.Stats().Accepted)
	if math.Abs(counted-float64(accepted)) > 0.02*float64(accepted) {
		t.Fatalf("the sends panel counts %.1f sends, the emulator accepted %d: more than 2 %% apart", counted, accepted)
	}
}

const procTokenMonitoring = "monitoring-test-admin-token-0123"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func monitoringCall(t *testing.T, base, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+procTokenMonitoring)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, raw)
	}
}

// scrapeSuccess reads pushfan_fcm_send_attempts_total's success series
// from pushfan's own /metrics.
func scrapeSuccess(t *testing.T, base, token string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "pushfan_fcm_send_attempts_total{") && strings.Contains(line, `outcome="success"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no success series in /metrics:\n%s", teststack.Tail(string(raw), 20))
	return 0
}

// promAPI is a Prometheus's HTTP API.
type promAPI struct{ base string }

// promSample is one element of an instant vector.
type promSample struct {
	metric map[string]string
	value  float64
}

// startPrometheus runs prometheus on a free loopback port until the test
// ends, and waits until it is ready.
func startPrometheus(t *testing.T, bin, cfg, data string) *promAPI {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(filepath.Dir(cfg), "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+data,
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("prometheus (pid %d) did not exit within 30s of kill -9", cmd.Process.Pid)
		}
		if t.Failed() {
			raw, _ := os.ReadFile(logPath)
			t.Logf("log of prometheus:\n%s", teststack.Tail(string(raw), 40))
		}
	})
	api := &promAPI{base: "http://" + addr}
	teststack.WaitEvery(t, "prometheus to be ready", 30*time.Second, 100*time.Millisecond, func() bool {
		select {
		case <-done:
			raw, _ := os.ReadFile(logPath)
			t.Fatalf("prometheus exited before ready:\n%s", raw)
		default:
		}
		resp, err := http.Get(api.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return api
}

// get calls the API and decodes its data, failing the test on an error.
func (a *promAPI) get(t *testing.T, path string, q url.Values, data any) {
	t.Helper()
	resp, err := http.Get(a.base + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Status != "success" {
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), resp.StatusCode, raw)
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// query runs an instant query (at now when at is zero); an expression
// that does not parse or run fails the test.
func (a *promAPI) query(t *testing.T, expr string, at time.Time) []promSample {
	t.Helper()
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	a.get(t, "/api/v1/query", q, &data)
	if data.ResultType != "vector" {
		return nil // a scalar: it ran
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal(data.Result, &vec); err != nil {
		t.Fatal(err)
	}
	out := make([]promSample, len(vec))
	for i, v := range vec {
		s, _ := v.Value[1].(string)
		val, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q: value %v", expr, v.Value)
		}
		out[i] = promSample{metric: v.Metric, value: val}
	}
	return out
}

// series counts the series matching sel since start.
func (a *promAPI) series(t *testing.T, sel string, start time.Time) int {
	t.Helper()
	var data []map[string]string
	a.get(t, "/api/v1/series", url.Values{"match[]": {sel}, "start": {strconv.FormatInt(start.Unix(), 10)}}, &data)
	return len(data)
}

// rules counts the rules evaluated at least once, and names one whose
// evaluation failed.
func (a *promAPI) rules(t *testing.T) (evaluated int, bad string) {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name           string `json:"name"`
				Health         string `json:"health"`
				LastError      string `json:"lastError"`
				LastEvaluation string `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	a.get(t, "/api/v1/rules", url.Values{}, &data)
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Health == "err" {
				return 0, r.Name + ": " + r.LastError
			}
			if r.Health == "ok" {
				evaluated++
			}
		}
	}
	return evaluated, ""
}
