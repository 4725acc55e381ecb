package console_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pushfan/fcmemu"
)

// projectEmulator is one Firebase project's FCM: an emulator that also
// records the project of every send's path (/v1/projects/{p}/messages:send),
// so a test can tell which project a message went through.
type projectEmulator struct {
	emu *fcmemu.Emulator
	url string

	mu       sync.Mutex
	projects map[string]int64 // project id → sends
}

func newProjectEmulator(t *testing.T) *projectEmulator {
	p := &projectEmulator{
		emu:      fcmemu.New(fcmemu.Config{Latency: 2 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil))),
		projects: map[string]int64{},
	}
	h := p.emu.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/v1"), "/projects/"); ok {
			project, _, _ := strings.Cut(rest, "/")
			p.mu.Lock()
			p.projects[project]++
			p.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// sends is the project → sends map so far (a copy).
func (p *projectEmulator) sends() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.projects))
	for k, v := range p.projects {
		out[k] = v
	}
	return out
}

// appsConfig is two apps, each with its own emulator, a named audience
// and a cron job: consumer's audience at the top level with its app key,
// partner's under its app.
const appsConfig = `
apps:
  - name: consumer
    project_id: acme-consumer
    endpoint: %s/v1
    rate_limit: 5000
  - name: partner
    project_id: acme-partner
    endpoint: %s/v1
    rate_limit: 2000
    audiences:
      - name: partner_low_ids
        description: partner users up to an id
        params:
          max_user: int
        sql: |
          SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token
          FROM device_tokens t JOIN users u ON u.id = t.user_id
          WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = 'partner' AND u.id <= :max_user
          ORDER BY t.id LIMIT :limit
audiences:
  - name: consumer_low_ids
    app: consumer
    description: consumer users up to an id
    params:
      max_user: int
    sql: |
      SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token
      FROM device_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = 'consumer' AND u.id <= :max_user
      ORDER BY t.id LIMIT :limit
jobs:
  - name: consumer_digest
    app: consumer
    schedule: "0 0 9 * * *"
    timezone: Asia/Seoul
    enabled: true
    audience: {all: true}
    message: {title: Consumer digest, body: Yours}
  - name: partner_digest
    app: partner
    schedule: "0 0 10 * * *"
    timezone: Asia/Seoul
    enabled: true
    audience: {all: true}
    message: {title: Partner digest, body: Yours}
`

// TestConsoleSwitchesApps: with two apps (two emulators, two project ids)
// the header has an app switcher; the chosen app survives a reload and
// filters every page: the totals, the broadcast list, the named audiences,
// the cron jobs and compose, whose broadcast is created in that app, sent
// only through that app's project, and shown with its app. A token limited
// to one app sees no switcher, only its app's broadcasts, and its compose
// names its app (required, as the deployment has two).
func TestConsoleSwitchesApps(t *testing.T) {
	consumer, partner := newProjectEmulator(t), newProjectEmulator(t)
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(appsConfig, consumer.url, partner.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	// partnerToken may use the partner app only (the last of repeated
	// variables wins).
	const partnerToken = "console-partner-token-0123456789"
	e := newEnv(t, 40, "PUSHFAN_CONFIG="+cfgPath,
		"PUSHFAN_ADMIN_TOKENS=ops:sender:"+senderToken+",watcher:viewer:"+viewerToken+",partners:sender:"+partnerToken+":partner")
	// Odd users' tokens are the consumer app's, even users' the partner's.
	if _, err := e.db.Exec(`UPDATE device_tokens SET app = IF(user_id % 2 = 0, 'partner', 'consumer')`); err != nil {
		t.Fatal(err)
	}
	eligible := func(app string) int64 {
		var n int64
		if err := e.db.Get(&n, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id
			WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = ?`, app); err != nil {
			t.Fatal(err)
		}
		return n
	}
	consumerTokens, partnerTokens := eligible("consumer"), eligible("partner")
	if consumerTokens == 0 || partnerTokens == 0 {
		t.Fatalf("seeded %d consumer and %d partner tokens; want some of each", consumerTokens, partnerTokens)
	}

	var apps struct {
		Apps []struct {
			Name      string `json:"name"`
			ProjectID string `json:"project_id"`
		} `json:"apps"`
	}
	if code := e.api("GET", "/push/apps", nil, &apps); code != http.StatusOK || fmt.Sprint(apps.Apps) != "[{consumer acme-consumer} {partner acme-partner}]" {
		t.Fatalf("GET /push/apps: %d %+v; want consumer (acme-consumer) and partner (acme-partner)", code, apps)
	}
	// One broadcast of the consumer app before the console opens.
	var first broadcast
	if code := e.api("POST", "/push/broadcast", map[string]any{"app": "consumer", "title": "Consumer news", "body": "b", "audience": map[string]any{"all": true}}, &first); code != http.StatusOK || first.Status != "completed" {
		t.Fatalf("consumer broadcast: %d %+v", code, first)
	}

	e.signIn(senderToken)
	e.waitFor("the app switcher with consumer and partner, consumer chosen", 20*time.Second,
		`(() => { const s = document.querySelector('#app-switcher'); return !!s && [...s.options].map((o) => o.value).join() === 'consumer,partner' && s.value === 'consumer' })()`)
	e.waitFor("the dashboard counting the consumer broadcast", 20*time.Second, `document.querySelector('#stat-broadcasts')?.dataset.value === '1'`)

	// The partner app: its totals have no broadcast yet, its list none.
	e.setValue("#app-switcher", "partner")
	e.page("dashboard")
	e.waitFor("the dashboard of the partner app (no broadcasts)", 20*time.Second,
		`document.body.dataset.app === 'partner' && document.querySelector('#stat-broadcasts')?.dataset.value === '0'`)
	e.route("#/broadcasts")
	e.page("broadcasts")
	e.waitFor("an empty broadcast list for partner", 20*time.Second,
		`document.querySelector('#broadcasts-table').getAttribute('aria-busy') === 'false' && document.querySelectorAll('#broadcasts-table tbody tr[data-id]').length === 0`)

	// Named audiences and cron jobs: the partner's only.
	e.route("#/audiences")
	e.page("audiences")
	if got := eval[[]string](e, "listing the named audiences", `[...document.querySelectorAll('[data-audience]')].map((c) => c.dataset.audience)`); fmt.Sprint(got) != "[partner_low_ids]" {
		t.Fatalf("the audiences page of partner shows %v, want [partner_low_ids]", got)
	}
	e.route("#/cron")
	e.page("cron")
	if got := eval[[]string](e, "listing the cron jobs", `[...document.querySelectorAll('#cron-jobs tr[data-job]')].map((r) => r.dataset.job)`); fmt.Sprint(got) != "[partner_digest]" {
		t.Fatalf("the cron page of partner shows %v, want [partner_digest]", got)
	}

	// The cluster: the budget of partner's project.
	e.route("#/cluster")
	e.page("cluster")
	e.waitFor("the cluster page showing partner's budget", 20*time.Second, text("#budget-h")+` === 'Budget of the app partner'`)
	var cluster struct {
		App   string  `json:"app"`
		Limit float64 `json:"limit_per_second"`
	}
	if code := e.api("GET", "/push/cluster?app=partner", nil, &cluster); code != http.StatusOK || cluster.App != "partner" || cluster.Limit != 2000 {
		t.Fatalf("GET /push/cluster?app=partner: %d %+v; want app partner, limit 2000/s", code, cluster)
	}

	// Compose in partner: its audiences only, its tokens counted, and the
	// broadcast created in partner.
	e.compose("Partner news", "For partners only")
	e.waitFor("compose saying it sends in partner", 10*time.Second, `document.querySelector('#compose-app')?.dataset.app === 'partner'`)
	if got := eval[[]string](e, "listing the named audiences offered", `[...document.querySelectorAll('#f-audience-name option')].map((o) => o.value).filter(Boolean)`); fmt.Sprint(got) != "[partner_low_ids]" {
		t.Fatalf("compose in partner offers the named audiences %v, want [partner_low_ids]", got)
	}
	e.waitFor(fmt.Sprintf("the preview counting partner's %d tokens", partnerTokens), 20*time.Second,
		fmt.Sprintf(`%s.replace(/\D/g, '') === '%d'`, text("#preview-count"), partnerTokens))
	consumerBefore := consumer.sends()
	e.send()
	e.page("watch")
	id := e.watchedID()
	e.waitFor("the partner broadcast completed, its app shown", 30*time.Second,
		`document.querySelector('#watch-status')?.textContent === 'completed' && document.querySelector('#broadcast-app')?.dataset.app === 'partner'`)

	var b struct {
		broadcast
		App string `json:"app"`
	}
	if code := e.api("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b); code != http.StatusOK || b.App != "partner" || b.Targeted != partnerTokens {
		t.Fatalf("GET /push/broadcasts/%d: %d app %q targeted %d; want app partner, %d targeted", id, code, b.App, b.Targeted, partnerTokens)
	}
	var stored string
	if err := e.db.Get(&stored, "SELECT app FROM broadcasts WHERE id = ?", id); err != nil || stored != "partner" {
		t.Fatalf("broadcast %d is stored with app %q (%v), want partner", id, stored, err)
	}
	if got := partner.sends(); len(got) != 1 || got["acme-partner"] != partnerTokens {
		t.Fatalf("the partner emulator got sends %v, want %d through acme-partner only", got, partnerTokens)
	}
	if got := consumer.sends(); fmt.Sprint(got) != fmt.Sprint(consumerBefore) || len(got) != 1 || got["acme-consumer"] != consumerTokens {
		t.Fatalf("the consumer emulator got sends %v (before the partner broadcast %v), want %d through acme-consumer only", got, consumerBefore, consumerTokens)
	}
	if n := e.emu.Stats().Requests; n != 0 {
		t.Fatalf("the environment's FCM endpoint got %d sends; every app has its own", n)
	}

	// The list: the partner broadcast only, the choice kept over a reload.
	e.route("#/broadcasts")
	e.page("broadcasts")
	listed := func(what string, want uint64) {
		e.t.Helper()
		e.waitFor(what, 20*time.Second, fmt.Sprintf(`document.querySelector('#broadcasts-table').getAttribute('aria-busy') === 'false' &&
			[...document.querySelectorAll('#broadcasts-table tbody tr[data-id]')].map((r) => r.dataset.id).join() === '%d'`, want))
	}
	listed(fmt.Sprintf("the list of partner showing broadcast %d only", id), id)
	e.do("reloading the console", 30*time.Second, chromedp.Reload())
	e.page("broadcasts")
	e.waitFor("partner still chosen after the reload", 10*time.Second, `document.querySelector('#app-switcher')?.value === 'partner'`)
	listed(fmt.Sprintf("the list of partner still showing broadcast %d only", id), id)
	var page struct {
		Broadcasts []broadcast `json:"broadcasts"`
	}
	if code := e.api("GET", "/push/broadcasts?app=partner", nil, &page); code != http.StatusOK || len(page.Broadcasts) != 1 || page.Broadcasts[0].ID != id {
		t.Fatalf("GET /push/broadcasts?app=partner: %d %+v; want broadcast %d only", code, page.Broadcasts, id)
	}
	e.shot("")

	// Back to consumer: its own broadcast only.
	e.setValue("#app-switcher", "consumer")
	e.page("broadcasts")
	listed(fmt.Sprintf("the list of consumer showing broadcast %d only", first.ID), first.ID)

	// A token limited to partner: one app, so no switcher; the partner
	// broadcast only, whatever was chosen before in this browser.
	e.click("#signout")
	e.page("signin")
	e.signIn(partnerToken)
	if eval[bool](e, "looking for an app switcher", `!!document.querySelector('#app-switcher')`) {
		t.Fatal("a token limited to one app is shown an app switcher")
	}
	if eval[bool](e, "looking for the Webhooks link", `!!document.querySelector('#nav a[href="#/webhooks"]')`) {
		t.Fatal("a token limited to one app is shown the Webhooks page, which serves every app and answers it 403")
	}
	e.route("#/broadcasts")
	e.page("broadcasts")
	listed(fmt.Sprintf("the partner token's list showing broadcast %d only", id), id)
	e.compose("Partner again", "b")
	e.waitFor(fmt.Sprintf("the partner token's preview counting partner's %d tokens", partnerTokens), 20*time.Second,
		fmt.Sprintf(`%s.replace(/\D/g, '') === '%d'`, text("#preview-count"), partnerTokens))
	req, err := http.NewRequest("GET", e.url+"/push/broadcasts?app=consumer", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+partnerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /push/broadcasts?app=consumer with the partner token: %d, want 403", resp.StatusCode)
	}
}
