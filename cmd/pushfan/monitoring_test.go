package main

// The dashboard (deploy/grafana/pushfan.json) and the alert rules
// (deploy/prometheus/rules.yaml): promtool checks and unit-tests the
// rules, every alert has its runbook, and every metric either names is
// one package metrics registers (a rename fails here, without a
// Prometheus). monitoring_process_test.go runs them against a real
// Prometheus scraping a running pushfan.
//
// Metric names are found in the expressions without the PromQL parser
// (github.com/prometheus/prometheus is a heavy module for one test): with
// strings, matchers and ranges taken out, pushfan's, Go's and the
// process's metrics are the only words starting pushfan_, go_ or
// process_, and label and function names never do. The live test's
// /api/v1/series check catches anything this misses.

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"pushfan/metrics"
)

var (
	rulesFile     = filepath.Join(deployDir, "prometheus", "rules.yaml")
	rulesTestFile = filepath.Join(deployDir, "prometheus", "rules_test.yaml")
	dashboardFile = filepath.Join(deployDir, "grafana", "pushfan.json")
)

// sendsPanel is the title of the dashboard's panel whose query the live
// test compares with the emulator's accepted count.
const sendsPanel = "Sends/s by outcome and app"

// promExpr is one PromQL expression of the dashboard or the rules, and
// where it is.
type promExpr struct {
	where string
	expr  string
}

// grafanaDashboard is the part of the dashboard's JSON the tests read.
type grafanaDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadDashboard(t testing.TB) grafanaDashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func loadRules(t testing.TB) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r ruleFile
	if err := yaml.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return r
}

// labelValues is a Grafana variable's query: label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]\w*\)$`)

// monitoringExprs lists every PromQL expression of the dashboard (its
// panels' targets, and the selectors of its query variables) and of the
// rules, with Grafana's variables left in.
func monitoringExprs(t testing.TB) []promExpr {
	t.Helper()
	var out []promExpr
	d := loadDashboard(t)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("dashboard variable %s: query: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("dashboard variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q.Query)
		}
		out = append(out, promExpr{"dashboard variable " + v.Name, m[1]})
	}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out = append(out, promExpr{"dashboard panel " + p.Title + " target " + string(rune('A'+i)), tg.Expr})
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			out = append(out, promExpr{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}

// substitute replaces Grafana's variables: every app and instance, and a
// rate interval of window.
func substitute(expr, window string) string {
	return strings.NewReplacer("$__rate_interval", window, "$app", ".*", "$instance", ".*").Replace(expr)
}

var (
	promString  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promBraces  = regexp.MustCompile(`\{[^}]*\}`)
	promRange   = regexp.MustCompile(`\[[^\]]*\]`)
	metricWord  = regexp.MustCompile(`\b(?:(?:pushfan|go|process)_[a-zA-Z0-9_:]*|up)\b`)
	selectorRex = regexp.MustCompile(`\b((?:pushfan|go|process)_[a-zA-Z0-9_:]*|up)\b(\{[^}]*\})?`)
)

// metricNames returns the metric names expr reads, sorted and unique.
func metricNames(expr string) []string {
	bare := promRange.ReplaceAllString(promBraces.ReplaceAllString(promString.ReplaceAllString(expr, `""`), ""), "")
	seen := map[string]bool{}
	for _, w := range metricWord.FindAllString(bare, -1) {
		seen[w] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// selectors returns expr's series selectors (a name and its matchers).
func selectors(expr string) []string {
	var out []string
	for _, m := range selectorRex.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// describeRecorder is a prometheus.Registerer that keeps the names of
// every collector's descriptions.
type describeRecorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *describeRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *describeRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *describeRecorder) Unregister(prometheus.Collector) bool { return true }

// registeredFamilies returns the metric families pushfan serve registers.
func registeredFamilies(t testing.TB) map[string]bool {
	t.Helper()
	// Never connected: the pool's stats collector only describes itself.
	db, err := sql.Open("mysql", "pushfan:x@tcp(127.0.0.1:9)/pushfan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &describeRecorder{names: map[string]bool{}}
	metrics.New(rec, db)
	metrics.NewState(rec, db, nil, nil, time.Second, nil)
	return rec.names
}

// family returns the family a series name belongs to (a histogram's
// _bucket, _sum and _count are its family's), or "" when none is registered.
func family(name string, fams map[string]bool) string {
	if fams[name] || name == "up" { // up: Prometheus's own, per target
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] {
			return base
		}
	}
	return ""
}

// Every metric the dashboard and the rules read is registered by package
// metrics: a metric renamed there fails this test.
func TestDashboardAndRulesNameOnlyRegisteredMetrics(t *testing.T) {
	fams := registeredFamilies(t)
	if !fams["pushfan_fcm_send_attempts_total"] || !fams["pushfan_chunks"] || !fams["go_goroutines"] {
		t.Fatalf("the recorder missed families: %v", fams)
	}
	exprs := monitoringExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions found in the dashboard and the rules", len(exprs))
	}
	for _, e := range exprs {
		names := metricNames(e.expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric name found in %q", e.where, e.expr)
		}
		for _, n := range names {
			if family(n, fams) == "" {
				t.Errorf("%s reads %s, which package metrics does not register (renamed?): %q", e.where, n, e.expr)
			}
		}
	}
	// The extraction itself: names inside matchers, strings and ranges are not metrics.
	got := metricNames(`histogram_quantile(0.99, sum by (le, app) (rate(pushfan_fcm_send_duration_seconds_bucket{code="pushfan_x", app=~"$app"}[5m]))) / on (app) up{job="p"}`)
	if strings.Join(got, " ") != "pushfan_fcm_send_duration_seconds_bucket up" {
		t.Fatalf("metricNames: %v", got)
	}
}

// promtoolPath is Debian's promtool (scripts/ensure-prometheus.sh), or
// PUSHFAN_PROMTOOL; missing, the test fails in CI and skips elsewhere.
func promtoolPath(t *testing.T) string {
	return monitoringTool(t, "PUSHFAN_PROMTOOL", "promtool")
}

func monitoringTool(t *testing.T, env, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: make test runs it, make test-short does not", name)
	}
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: bash scripts/ensure-prometheus.sh installs it", name)
	}
	t.Skipf("%s is not installed (bash scripts/ensure-prometheus.sh)", name)
	return ""
}

// promtool check rules and promtool test rules pass; every alert has a
// unit test that fires it and one that does not; every runbook_url is a
// section of docs/operations.md.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := promtoolPath(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	raw, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}

	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(ops), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			anchors[githubAnchor(h)] = true
		}
	}

	want := []string{"PushfanQuotaUnderused", "PushfanFCM429Sustained", "PushfanCheckpointsSlow", "PushfanBroadcastStuck",
		"PushfanWebhookEndpointDisabled", "PushfanLeaseTakeoverStorm", "PushfanNoInstanceReady"}
	have := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			have[r.Alert] = true
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a unit test that fires it: %v, one that does not: %v", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			u := r.Annotations["runbook_url"]
			page, anchor, _ := strings.Cut(u, "#")
			if page != "docs/operations.md" || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not a section of docs/operations.md", r.Alert, u)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
		}
	}
	for _, a := range want {
		if !have[a] {
			t.Errorf("rules.yaml has no alert %s", a)
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
