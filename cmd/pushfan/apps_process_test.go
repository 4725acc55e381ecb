package main

// Several apps in one deployment (issue 27, docs/apps.md), on the real
// binary: two apps, two Firebase project ids, two emulators; and a
// database of the release before apps, upgraded.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// appView is an entry of GET /push/apps.
type appView struct {
	Name      string  `json:"name"`
	ProjectID string  `json:"project_id"`
	RateLimit float64 `json:"rate_limit"`
}

type appsList struct {
	Apps []appView `json:"apps"`
}

// statsView is the part of GET /push/stats these tests read.
type statsView struct {
	Broadcasts int64 `json:"broadcasts"`
	Targeted   int64 `json:"targeted"`
	Succeeded  int64 `json:"succeeded"`
	Failed     int64 `json:"failed"`
}

type broadcastPage struct {
	Broadcasts []appBroadcast `json:"broadcasts"`
}

func listIDs(t *testing.T, p *teststack.Process, token, query string) []uint64 {
	t.Helper()
	var page broadcastPage
	doJSON(t, p.URL, token, "GET", "/push/broadcasts"+query, "", http.StatusOK, &page)
	var ids []uint64
	for _, b := range page.Broadcasts {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	return ids
}

// wantError makes a call that must be refused with status, its error
// naming field (when not empty), or with code forbidden_app (a 403).
func wantError(t *testing.T, p *teststack.Process, token, method, path, body string, status int, field string) {
	t.Helper()
	got, raw := do(t, p.URL, token, method, path, body)
	if got != status {
		t.Fatalf("%s %s %s: HTTP %d, want %d: %s", method, path, body, got, status, raw)
	}
	var e apiError
	err := json.Unmarshal(raw, &e)
	switch {
	case field != "" && (err != nil || e.Error.Field != field):
		t.Fatalf("%s %s %s: %s, want an error naming the field %q", method, path, body, raw, field)
	case status == http.StatusForbidden && (err != nil || e.Error.Code != "forbidden_app"):
		t.Fatalf("%s %s %s: %s, want the error code forbidden_app", method, path, body, raw)
	}
}

// partnerAudience is a named audience of the partner app.
const partnerAudience = `    audiences:
      - name: partner_all
        sql: |
          SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token FROM device_tokens t
          WHERE t.app = 'partner' AND t.invalidated_at IS NULL AND t.id > :after AND t.id <= :upto
          ORDER BY t.id LIMIT :limit
`

// Two apps, two project ids, two emulators: each app's broadcast reaches
// only its own emulator, under its own project path, every token exactly
// once, and no token of one app goes through the other's project, though
// the same users hold tokens of both. The broadcast, the lists, the stats
// and the send metrics each carry their app; a token limited to one app
// is refused the other.
func TestTwoAppsEachReachOnlyItsOwnProject(t *testing.T) {
	const nConsumer, nPartner = 3000, 2000
	s := newAppsStack(t, []appSpec{
		{name: "consumer", project: "acme-consumer", rateLimit: 5000},
		{name: "partner", project: "acme-partner", rateLimit: 3000, yaml: partnerAudience},
	})
	consumerToks := s.seedTokens("consumer", "ctok-", nConsumer)
	partnerToks := s.seedTokens("partner", "ptok-", nPartner) // users 1..2000 hold a token of each app
	p := s.start("apps")

	var apps appsList
	doJSON(t, p.URL, appsToken, "GET", "/push/apps", "", http.StatusOK, &apps)
	if want := []appView{{"consumer", "acme-consumer", 5000}, {"partner", "acme-partner", 3000}}; !slices.Equal(apps.Apps, want) {
		t.Fatalf("GET /push/apps: %+v, want %+v", apps.Apps, want)
	}

	// With two apps, a broadcast names one it knows.
	wantError(t, p, appsToken, "POST", "/push/broadcast", `{"title":"t","audience":{"all":true}}`, http.StatusBadRequest, "app")
	wantError(t, p, appsToken, "POST", "/push/broadcast", `{"app":"nope","title":"t","audience":{"all":true}}`, http.StatusBadRequest, "app")
	if n := s.emus["consumer"].total() + s.emus["partner"].total(); n != 0 {
		t.Fatalf("refused broadcasts sent %d messages", n)
	}

	c := submitApp(t, p, "consumer", "to consumers")
	cf := waitBroadcastEnd(t, p, c.ID, time.Minute)
	if cf.Status != "completed" || cf.App != "consumer" || cf.Targeted != nConsumer || cf.Succeeded != nConsumer || cf.Failed != 0 {
		t.Fatalf("consumer broadcast: %+v (app %q), want %d completed in app consumer", cf.Broadcast, cf.App, nConsumer)
	}
	s.checkOnlyTo("consumer", "acme-consumer", consumerToks, 1)
	if n := s.emus["partner"].total(); n != 0 {
		t.Fatalf("the consumer broadcast sent %d messages through the partner app's emulator", n)
	}

	pb := submitApp(t, p, "partner", "to partners")
	pf := waitBroadcastEnd(t, p, pb.ID, time.Minute)
	if pf.Status != "completed" || pf.App != "partner" || pf.Targeted != nPartner || pf.Succeeded != nPartner || pf.Failed != 0 {
		t.Fatalf("partner broadcast: %+v (app %q), want %d completed in app partner", pf.Broadcast, pf.App, nPartner)
	}
	s.checkOnlyTo("partner", "acme-partner", partnerToks, 1)
	s.checkOnlyTo("consumer", "acme-consumer", consumerToks, 1) // unchanged

	// Lists, stats and metrics by app.
	if ids := listIDs(t, p, appsToken, "?app=partner"); !slices.Equal(ids, []uint64{pf.ID}) {
		t.Fatalf("GET /push/broadcasts?app=partner: %v, want [%d]", ids, pf.ID)
	}
	if ids := listIDs(t, p, appsToken, "?app=consumer"); !slices.Equal(ids, []uint64{cf.ID}) {
		t.Fatalf("GET /push/broadcasts?app=consumer: %v, want [%d]", ids, cf.ID)
	}
	wantError(t, p, appsToken, "GET", "/push/broadcasts?app=nope", "", http.StatusBadRequest, "app")
	for app, n := range map[string]int64{"consumer": nConsumer, "partner": nPartner} {
		var st statsView
		doJSON(t, p.URL, appsToken, "GET", "/push/stats?app="+app, "", http.StatusOK, &st)
		if st.Broadcasts != 1 || st.Targeted != n || st.Succeeded != n || st.Failed != 0 {
			t.Fatalf("GET /push/stats?app=%s: %+v, want its one broadcast of %d", app, st, n)
		}
		if got := metricSum(t, p, "pushfan_fcm_send_attempts_total", `app="`+app+`"`, `outcome="success"`); got != float64(n) {
			t.Fatalf(`pushfan_fcm_send_attempts_total{app=%q,outcome="success"} = %v, want %d`, app, got, n)
		}
	}

	// A token limited to consumer: 403 on everything of partner, and its
	// lists, stats and apps hold consumer's only.
	scoped := scopedSecret
	byID := fmt.Sprintf("/push/broadcasts/%d", pf.ID)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/push/broadcast", `{"app":"partner","title":"t","audience":{"all":true}}`},
		{"POST", "/push/broadcast", `{"app":"partner","title":"t","audience":{"name":"partner_all"}}`},
		{"POST", "/push/test", `{"app":"partner","title":"t","tokens":["ptok-1"]}`},
		{"POST", "/push/preview", `{"app":"partner","audience":{"all":true}}`},
		{"POST", "/push/audiences/partner_all/preview", `{}`},
		{"GET", byID, ""},
		{"GET", byID + "/failures", ""},
		{"GET", byID + "/engagement", ""},
		{"GET", byID + "/events", ""},
		{"POST", byID + "/test", `{"tokens":["ptok-1"]}`},
		{"POST", byID + "/cancel", ""},
		{"POST", byID + "/release", ""},
		{"POST", byID + "/resend", `{}`},
		{"GET", "/push/broadcasts?app=partner", ""},
		{"GET", "/push/stats?app=partner", ""},
	} {
		wantError(t, p, scoped, r.method, r.path, r.body, http.StatusForbidden, "")
	}
	doJSON(t, p.URL, scoped, "GET", "/push/apps", "", http.StatusOK, &apps)
	if len(apps.Apps) != 1 || apps.Apps[0].Name != "consumer" {
		t.Fatalf("GET /push/apps with a token limited to consumer: %+v, want consumer only", apps.Apps)
	}
	if ids := listIDs(t, p, scoped, ""); !slices.Equal(ids, []uint64{cf.ID}) {
		t.Fatalf("GET /push/broadcasts with a token limited to consumer: %v, want [%d]", ids, cf.ID)
	}
	var st statsView
	doJSON(t, p.URL, scoped, "GET", "/push/stats", "", http.StatusOK, &st)
	if st.Broadcasts != 1 || st.Succeeded != nConsumer {
		t.Fatalf("GET /push/stats with a token limited to consumer: %+v, want consumer's one broadcast of %d", st, nConsumer)
	}
	s.checkOnlyTo("partner", "acme-partner", partnerToks, 1) // the refused sends sent nothing
	t.Logf("consumer: %d tokens in %d ms, partner: %d in %d ms, each only through its own project", nConsumer, *cf.DurationMS, nPartner, *pf.DurationMS)
}

// preAppsVersion is the schema version of the release before apps: the
// last migration before the one that adds device_tokens.app.
const preAppsVersion = 20

// A database of the release before apps, with tokens and a finished
// broadcast, upgraded by starting this release in the environment-only
// configuration: every token is of the app default, the old broadcast
// reads as app default, and a new broadcast that names no app works as
// before.
func TestUpgradeKeepsTokensAndBroadcastsInTheDefaultApp(t *testing.T) {
	const n = 1500
	tdb := testdb.NewAt(t, preAppsVersion)
	toks := seedAppTokens(t, tdb.SQL, "", "legacy-", n)
	var oldID uint64
	res, err := tdb.SQL.Exec(`INSERT INTO broadcasts (status, message, audience, trigger_kind, targeted, succeeded, failed, created_at, started_at, planned_at, finished_at)
		VALUES ('completed', '{"title":"before apps"}', '{"all":true}', 'api', ?, ?, 0,
			NOW(6) - INTERVAL 1 HOUR, NOW(6) - INTERVAL 1 HOUR, NOW(6) - INTERVAL 1 HOUR, NOW(6) - INTERVAL 59 MINUTE)`, n, n)
	if err != nil {
		t.Fatalf("a finished broadcast at schema %d: %v", preAppsVersion, err)
	}
	if id, err := res.LastInsertId(); err != nil {
		t.Fatal(err)
	} else {
		oldID = uint64(id)
	}

	emu := newProjectLog(t, fcmemu.Config{})
	p := newUpgradeServe(t, tdb.DSN, emu)

	rows, err := tdb.SQL.Query("SELECT app, COUNT(*) FROM device_tokens GROUP BY app")
	if err != nil {
		t.Fatalf("device_tokens.app after the upgrade: %v", err)
	}
	byApp := map[string]int{}
	for rows.Next() {
		var app string
		var c int
		if err := rows.Scan(&app, &c); err != nil {
			t.Fatal(err)
		}
		byApp[app] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(byApp) != 1 || byApp["default"] != n {
		t.Fatalf("tokens by app after the upgrade: %v, want all %d in default", byApp, n)
	}

	old := getBroadcast(t, p, oldID)
	if old.App != "default" || old.Status != "completed" || old.Succeeded != n || old.Targeted != n {
		t.Fatalf("the broadcast from before apps: %+v (app %q), want completed, %d succeeded, app default", old.Broadcast, old.App, n)
	}
	var apps appsList
	doJSON(t, p.URL, appsToken, "GET", "/push/apps", "", http.StatusOK, &apps)
	if len(apps.Apps) != 1 || apps.Apps[0].Name != "default" || apps.Apps[0].ProjectID != "legacy-project" {
		t.Fatalf("GET /push/apps in the environment-only configuration: %+v, want the one app default of project legacy-project", apps.Apps)
	}

	// A new broadcast, as an existing client sends it: no app.
	nb := submitApp(t, p, "", "after the upgrade")
	nf := waitBroadcastEnd(t, p, nb.ID, time.Minute)
	if nf.Status != "completed" || nf.App != "default" || nf.Targeted != n || nf.Succeeded != n {
		t.Fatalf("a broadcast after the upgrade: %+v (app %q), want %d completed in app default", nf.Broadcast, nf.App, n)
	}
	accepted, requests := emu.snapshot()
	for _, tok := range toks {
		if c := accepted[tok]; c["legacy-project"] != 1 || len(c) != 1 {
			t.Fatalf("token %s accepted %v, want once under project legacy-project", tok, c)
		}
	}
	if len(accepted) != n || len(requests) != 1 {
		t.Fatalf("the emulator accepted %d tokens (want %d) under projects %v (want legacy-project only)", len(accepted), n, requests)
	}
	if ids := listIDs(t, p, appsToken, "?app=default"); !slices.Equal(ids, []uint64{oldID, nf.ID}) {
		t.Fatalf("GET /push/broadcasts?app=default: %v, want [%d %d]", ids, oldID, nf.ID)
	}
	var st statsView
	doJSON(t, p.URL, appsToken, "GET", "/push/stats", "", http.StatusOK, &st)
	if st.Broadcasts != 2 || st.Succeeded != 2*n {
		t.Fatalf("GET /push/stats after the upgrade: %+v, want the old broadcast and the new one, %d succeeded", st, 2*n)
	}
}

// newUpgradeServe starts `pushfan serve` in the environment-only
// configuration of before apps (no PUSHFAN_CONFIG) on dsn, sending to emu
// as project legacy-project. It migrates the database as it starts.
func newUpgradeServe(t *testing.T, dsn string, emu *projectLog) *teststack.Process {
	t.Helper()
	env := append(withoutPushfanEnv(),
		"PUSHFAN_MYSQL_DSN="+dsn,
		"PUSHFAN_FCM_ENDPOINT="+emu.endpoint(),
		"PUSHFAN_FCM_PROJECT_ID=legacy-project",
		"PUSHFAN_ADMIN_TOKENS="+appsToken,
		"PUSHFAN_LOG_FORMAT=text",
		"PUSHFAN_INSTANCE_ID=upgraded",
	)
	return teststack.StartServe(t, binary, "upgraded", env)
}
