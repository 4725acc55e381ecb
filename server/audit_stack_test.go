package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pushfan/audit"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

const (
	auditAlice  = "alice-audit-0123456789"
	auditViewer = "viewer-audit-0123456789"
)

// auditStack has the bare admin token (admin-1), alice (an approver),
// a viewer, a table-consent category, a webhook endpoint and a config
// file of audiences (for a reload).
func auditStack(t *testing.T) *teststack.Stack {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(file, []byte(reloadAudiencesYAML([2]string{"everyone", ""})), 0o600); err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hooks.Close)
	return reloadStack(t, file, func(c *config.Config) {
		c.AdminTokens = append(c.AdminTokens, "alice:approver:"+auditAlice, "dash:viewer:"+auditViewer)
		c.WebhookAllowPrivate = true // the receiver is on loopback
		c.Webhooks = []config.Webhook{{Name: "app", URL: hooks.URL, Secret: hookSecret}}
		c.Categories = []config.Category{{Name: "advertising", Consent: "table"}, {Name: "service"}}
		c.DefaultCategory = "service"
	})
}

type auditPage struct {
	Entries []model.AuditEntry `json:"entries"`
	Next    *string            `json:"next"`
}

// auditEntries reads every entry the query selects (all pages).
func auditEntries(t *testing.T, s *teststack.Stack, query string) []model.AuditEntry {
	t.Helper()
	var out []model.AuditEntry
	after := ""
	for range 100 {
		var p auditPage
		q := "/push/audit?limit=500" + query + after
		if r := s.Do(http.MethodGet, q, nil, &p); r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", q, r.StatusCode)
		}
		out = append(out, p.Entries...)
		if p.Next == nil {
			return out
		}
		after = "&after=" + *p.Next
	}
	t.Fatal("the audit's pages do not end")
	return nil
}

// TestEveryChangeWritesOneAuditEntry makes a representative change of
// each kind through the API and reads exactly one entry for each, with
// its actor, action and target, in order; a refused request writes none,
// and the broadcasts name who created, released and canceled them.
func TestEveryChangeWritesOneAuditEntry(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	s.SeedTokens(1, []string{"audit-1", "audit-2"})
	admin := model.Actor{Kind: model.ActorToken, ID: "admin-1", Name: "admin-1"}
	alice := model.Actor{Kind: model.ActorToken, ID: "alice", Name: "alice"}
	type want struct {
		actor          model.Actor
		action, target string
	}
	var wants []want

	// A held broadcast, released by alice.
	held := hold(t, s, teststack.AdminToken, 2, nil)
	wants = append(wants, want{admin, audit.BroadcastCreate, fmt.Sprintf("broadcast:%d", held.ID)})
	// Its rehearsal: a test send of the stored message.
	if r := s.Do(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/test", held.ID), map[string]any{"user_ids": []uint64{1}}, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("the held broadcast's test send: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.TestSend, fmt.Sprintf("broadcast:%d", held.ID)})
	var b teststack.Broadcast
	if r := s.DoAuth(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/release", held.ID), auditAlice, nil, &b); r.StatusCode != http.StatusOK {
		t.Fatalf("release: %d", r.StatusCode)
	}
	wants = append(wants, want{alice, audit.BroadcastRelease, fmt.Sprintf("broadcast:%d", held.ID)})

	// Another, canceled by alice: the broadcast names her.
	other := hold(t, s, teststack.AdminToken, 2, nil)
	wants = append(wants, want{admin, audit.BroadcastCreate, fmt.Sprintf("broadcast:%d", other.ID)})
	if r := s.DoAuth(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", other.ID), auditAlice, nil, &b); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	wants = append(wants, want{alice, audit.BroadcastCancel, fmt.Sprintf("broadcast:%d", other.ID)})
	var shown map[string]any
	s.Do(http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", other.ID), nil, &shown)
	canceled := shown
	shown = nil
	if canceled["canceled_by"] != "alice" || canceled["created_by"] != "admin-1" || canceled["status"] != "canceled" {
		t.Fatalf("the canceled broadcast: %v", canceled)
	}
	s.Do(http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", held.ID), nil, &shown)
	if shown["released_by"] != "alice" || shown["created_by"] != "admin-1" || shown["canceled_by"] != nil {
		t.Fatalf("the released broadcast: %v", shown)
	}

	// A refused change writes nothing: an unknown broadcast, a viewer's cancel.
	if r := s.Do(http.MethodPost, "/push/broadcasts/999999/cancel", nil, nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("cancel of an unknown broadcast: %d", r.StatusCode)
	}
	if r := s.DoAuth(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", held.ID), auditViewer, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's cancel: %d", r.StatusCode)
	}

	// A segment, then its second version.
	filter := `{"field":"platform","op":"eq","value":"android"}`
	if r := s.Do(http.MethodPost, "/push/segments", `{"name": "droids", "filter": `+filter+`}`, nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("segment create: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.SegmentCreate, "segment:droids"})
	if r := s.DoAuth(http.MethodPut, "/push/segments/droids", auditAlice, `{"filter": `+filter+`, "description": "v2"}`, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("segment update: %d", r.StatusCode)
	}
	wants = append(wants, want{alice, audit.SegmentUpdate, "segment:droids"})
	if r := s.Do(http.MethodDelete, "/push/segments/droids", nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("segment delete: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.SegmentDelete, "segment:droids"})

	// A consent answer.
	if r := s.Do(http.MethodPut, "/push/users/7/consents/advertising", map[string]any{"granted": true, "source": "signup"}, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("consent: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.ConsentUpdate, "user:7"})

	// A test send (no table changes: recorded after the answer) and a reload.
	if r := s.Do(http.MethodPost, "/push/test", map[string]any{"title": "t", "body": "b", "tokens": []string{"audit-1"}}, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("test send: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.TestSend, ""})
	if r := s.Do(http.MethodPost, "/push/audiences/reload", nil, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.AudiencesReload, ""})

	// The webhook endpoint: a redelivery of the held event, and an enable.
	var outbox uint64
	if err := s.SQL.Get(&outbox, "SELECT MIN(id) FROM webhook_outbox WHERE endpoint = 'app'"); err != nil {
		t.Fatal(err)
	}
	if r := s.Do(http.MethodPost, fmt.Sprintf("/push/webhooks/app/deliveries/%d/redeliver", outbox), nil, nil); r.StatusCode != http.StatusAccepted {
		t.Fatalf("redeliver: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.WebhookRedeliver, "webhook:app"})
	if r := s.Do(http.MethodPost, "/push/webhooks/app/enable", nil, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("enable: %d", r.StatusCode)
	}
	wants = append(wants, want{admin, audit.WebhookEnable, "webhook:app"})

	got := auditEntries(t, s, "")
	if len(got) != len(wants) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		e := got[len(got)-1-i] // newest first
		if e.Actor != w.actor || e.Action != w.action || e.Target != w.target {
			t.Errorf("entry %d: %+v %s %q; want %+v %s %q", i, e.Actor, e.Action, e.Target, w.actor, w.action, w.target)
		}
		if e.IP == "" || e.RequestID == "" || time.Since(e.At) > time.Minute {
			t.Errorf("entry %d: ip %q, request id %q, at %v", i, e.IP, e.RequestID, e.At)
		}
	}
	details := map[string]string{}
	for _, e := range got {
		details[e.Action] = string(e.Detail)
	}
	if details[audit.ConsentUpdate] != `{"category":"advertising"}` || details[audit.SegmentUpdate] != `{"version":2}` ||
		details[audit.WebhookRedeliver] != fmt.Sprintf(`{"id":"%d"}`, outbox) {
		t.Errorf("details %v", details)
	}
}

// TestAnAuditEntryCommitsWithItsChangeOrNeither: when the entry cannot be
// stored, the change is rolled back with it (the client gets a 500), and
// when the change's transaction rolls back after its entry was written,
// the entry goes too. A trigger refuses the entry after its row went in.
func TestAnAuditEntryCommitsWithItsChangeOrNeither(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	filter := `{"field":"platform","op":"eq","value":"ios"}`
	if r := s.Do(http.MethodPost, "/push/segments", `{"name": "phones", "filter": `+filter+`}`, nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("segment create: %d", r.StatusCode)
	}
	if _, err := s.SQL.Exec(`CREATE TRIGGER audit_refuses AFTER INSERT ON audit_entries FOR EACH ROW
		BEGIN IF NEW.action = 'segment.update' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END`); err != nil {
		t.Fatal(err)
	}
	if r := s.Do(http.MethodPut, "/push/segments/phones", `{"filter": `+filter+`, "description": "v2"}`, nil); r.StatusCode != http.StatusInternalServerError {
		t.Fatalf("an update whose entry is refused: %d; want 500", r.StatusCode)
	}
	var versions, entries int
	if err := s.SQL.Get(&versions, "SELECT COUNT(*) FROM segment_versions"); err != nil || versions != 1 {
		t.Fatalf("%d segment versions (%v); want 1: the update rolled back with its entry", versions, err)
	}
	if err := s.SQL.Get(&entries, "SELECT COUNT(*) FROM audit_entries WHERE action = 'segment.update'"); err != nil || entries != 0 {
		t.Fatalf("%d update entries (%v); want 0", entries, err)
	}
	if _, err := s.SQL.Exec("DROP TRIGGER audit_refuses"); err != nil {
		t.Fatal(err)
	}
	if r := s.Do(http.MethodPut, "/push/segments/phones", `{"filter": `+filter+`, "description": "v2"}`, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("the update again: %d", r.StatusCode)
	}
	if got := auditEntries(t, s, "&action=segment.update"); len(got) != 1 || got[0].Target != "segment:phones" {
		t.Fatalf("update entries %+v; want exactly one", got)
	}
}

// TestTheAuditListFiltersPagesAndExports reads a trail of 7 entries by
// actor, action and target, in pages by the next cursor, and as NDJSON;
// bad parameters are 400s naming them, and a viewer may not read it.
func TestTheAuditListFiltersPagesAndExports(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	trail := audit.NewStore(s.SQL.DB)
	ctx := context.Background()
	bob := model.Actor{Kind: model.ActorPerson, ID: "sub-bob", Name: "bob@example.com"}
	ci := model.Actor{Kind: model.ActorKey, ID: "17", Name: "ci"}
	for i, e := range []model.AuditEntry{
		{Actor: bob, Action: audit.BroadcastCreate, Target: "broadcast:1"},
		{Actor: ci, Action: audit.BroadcastCreate, Target: "broadcast:2"},
		{Actor: bob, Action: audit.BroadcastCancel, Target: "broadcast:1"},
		{Actor: ci, Action: audit.SegmentUpdate, Target: "segment:a", Detail: json.RawMessage(`{"version":2}`)},
		{Actor: bob, Action: audit.BroadcastRelease, Target: "broadcast:2"},
		{Actor: ci, Action: audit.TestSend},
		{Actor: bob, Action: audit.SignIn},
	} {
		e.At = time.Now().Add(time.Duration(i-10) * time.Second)
		e.IP, e.RequestID = "192.0.2.1", fmt.Sprintf("req-%d", i)
		if err := trail.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(es []model.AuditEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.RequestID
		}
		return out
	}
	check := func(query string, want ...string) {
		t.Helper()
		got := ids(auditEntries(t, s, query))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v; want %v", query, got, want)
		}
	}
	check("", "req-6", "req-5", "req-4", "req-3", "req-2", "req-1", "req-0")
	check("&actor=bob@example.com", "req-6", "req-4", "req-2", "req-0")
	check("&actor=17", "req-5", "req-3", "req-1")
	check("&action=broadcast.create", "req-1", "req-0")
	check("&target=broadcast:1", "req-2", "req-0")
	check("&actor=ci&action=broadcast.create", "req-1")
	check("&action=key.revoke")

	// Pages of 3 by the cursor: 3, 3, 1, then no next.
	var pages [][]string
	after := ""
	for range 5 {
		var p auditPage
		if r := s.Do(http.MethodGet, "/push/audit?limit=3"+after, nil, &p); r.StatusCode != http.StatusOK {
			t.Fatalf("page: %d", r.StatusCode)
		}
		pages = append(pages, ids(p.Entries))
		if p.Next == nil {
			break
		}
		after = "&after=" + *p.Next
	}
	if fmt.Sprint(pages) != "[[req-6 req-5 req-4] [req-3 req-2 req-1] [req-0]]" {
		t.Errorf("pages %v", pages)
	}

	for q, field := range map[string]string{"limit=0": "limit", "limit=501": "limit", "limit=x": "limit", "after=-1": "after", "after=abc": "after"} {
		var e struct {
			Error struct{ Field, Code string }
		}
		if r := s.Do(http.MethodGet, "/push/audit?"+q, nil, &e); r.StatusCode != http.StatusBadRequest || e.Error.Field != field {
			t.Errorf("?%s: %d %+v; want 400 naming %s", q, r.StatusCode, e, field)
		}
	}
	if r := s.DoAuth(http.MethodGet, "/push/audit", auditViewer, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's read: %d; want 403", r.StatusCode)
	}
	if r := s.DoAuth(http.MethodGet, "/push/audit", auditAlice, nil, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("an approver's read: %d; want 403", r.StatusCode)
	}

	// The export: NDJSON, newest first, filtered.
	req, err := http.NewRequest(http.MethodGet, s.API.URL+"/push/audit/export?actor=sub-bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var lines []model.AuditEntry
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var e model.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, e)
	}
	if got := ids(lines); fmt.Sprint(got) != "[req-6 req-4 req-2 req-0]" || lines[0].Actor != bob {
		t.Errorf("export: %v %+v", got, lines[0].Actor)
	}
}

// TestAuditRetention: a retention pass deletes the entries older than
// PUSHFAN_AUDIT_RETENTION (400 days by default) and keeps the rest.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	if s.Config.Engine.AuditRetention != 400*24*time.Hour {
		t.Fatalf("the default retention is %v", s.Config.Engine.AuditRetention)
	}
	trail := audit.NewStore(s.SQL.DB)
	ctx := context.Background()
	day := 24 * time.Hour
	for i, age := range []time.Duration{500 * day, 401 * day, 399 * day, day, 0} {
		e := model.AuditEntry{At: time.Now().Add(-age), Actor: model.Actor{Kind: model.ActorToken, ID: "t", Name: "t"},
			Action: audit.TestSend, RequestID: fmt.Sprintf("age-%d", i)}
		if err := trail.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.First.App.Retention.RunOnce(ctx)
	if err != nil || !res.Ran || res.AuditEntries != 2 {
		t.Fatalf("retention pass: %+v %v; want 2 audit entries deleted", res, err)
	}
	var left []string
	if err := s.SQL.Select(&left, "SELECT request_id FROM audit_entries ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[age-2 age-3 age-4]" {
		t.Fatalf("left %v", left)
	}
}

// TestACronTriggerIsRecordedAsTheInternalToken: POST /internal/cron/{job}
// writes job.fire by the internal token, with the fire's broadcast in its
// detail, in the submit's transaction; the same fire again changes
// nothing and is recorded after its answer, marked replayed.
func TestACronTriggerIsRecordedAsTheInternalToken(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{{Name: "digest", Schedule: "0 9 * * MON", Timezone: "Asia/Seoul", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "digest"}}}
	}})
	s.SeedTokens(1, []string{"cron-1"})
	var first, again struct {
		ID uint64 `json:"id"`
	}
	s.DoAuth(http.MethodPost, "/internal/cron/digest", internalToken, `{"fire_time":"2026-01-05T09:00:00+09:00"}`, &first)
	s.DoAuth(http.MethodPost, "/internal/cron/digest", internalToken, `{"fire_time":"2026-01-05T09:00:00+09:00"}`, &again)
	if first.ID == 0 || again.ID != first.ID {
		t.Fatalf("fires %d then %d", first.ID, again.ID)
	}
	got := auditEntries(t, s, "")
	internal := model.Actor{Kind: model.ActorToken, ID: "internal", Name: "internal"}
	if len(got) != 2 {
		t.Fatalf("%d entries: %+v", len(got), got)
	}
	for _, e := range got {
		if e.Actor != internal || e.Action != audit.JobFire || e.Target != "job:digest" {
			t.Errorf("entry %+v", e)
		}
	}
	if string(got[1].Detail) != fmt.Sprintf(`{"broadcast":"%d"}`, first.ID) || string(got[0].Detail) != fmt.Sprintf(`{"broadcast":"%d","replayed":true}`, first.ID) {
		t.Errorf("details: the fire %s, the repeat %s", got[1].Detail, got[0].Detail)
	}
}
