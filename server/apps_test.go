package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

// appsStack is a stack with two apps, consumer on the stack's emulator and
// partner on an emulator of its own, each with a project of its own, and
// tokens of each in device_tokens: nc consumer and np partner tokens, one
// user each.
func appsStack(t *testing.T, nc, np int, tokens ...string) (*teststack.Stack, *fcmemu.Emulator) {
	t.Helper()
	partnerEmu := fcmemu.New(fcmemu.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(partnerEmu.Handler())
	t.Cleanup(srv.Close)
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Apps = []config.App{
			{Name: "consumer", ProjectID: "acme-consumer"},
			{Name: "partner", ProjectID: "acme-partner", Endpoint: srv.URL + "/v1", RateLimit: 50000},
		}
		c.AdminTokens = append(c.AdminTokens, tokens...)
	}})
	var rows []string
	for i := 1; i <= nc+np; i++ {
		rows = append(rows, fmt.Sprintf("(%d)", i))
	}
	s.MustExec("INSERT INTO users (id) VALUES " + strings.Join(rows, ","))
	rows = rows[:0]
	for i := 1; i <= nc+np; i++ {
		app, name := "consumer", fmt.Sprintf("c-%d", i)
		if i > nc {
			app, name = "partner", fmt.Sprintf("p-%d", i)
		}
		rows = append(rows, fmt.Sprintf("(%d, '%s', '%s')", i, name, app))
	}
	s.MustExec("INSERT INTO device_tokens (user_id, token, app) VALUES " + strings.Join(rows, ","))
	return s, partnerEmu
}

// Each app's broadcast reaches only its own emulator: its own tokens, none
// of the other app's, and the app is kept on the broadcast.
func TestEachAppsBroadcastReachesItsOwnProjectOnly(t *testing.T) {
	t.Parallel()
	s, partnerEmu := appsStack(t, 1200, 700)
	var c, p teststack.Broadcast
	if r := s.Do(http.MethodPost, "/push/broadcast?wait=false", map[string]any{"app": "consumer", "title": "c", "audience": map[string]any{"all": true}}, &c); r.StatusCode != http.StatusAccepted && r.StatusCode != http.StatusOK {
		t.Fatalf("consumer broadcast: %d", r.StatusCode)
	}
	if r := s.Do(http.MethodPost, "/push/broadcast?wait=false", map[string]any{"app": "partner", "title": "p", "audience": map[string]any{"all": true}}, &p); r.StatusCode != http.StatusAccepted && r.StatusCode != http.StatusOK {
		t.Fatalf("partner broadcast: %d", r.StatusCode)
	}
	c = s.WaitFinished(c.ID, time.Minute)
	p = s.WaitFinished(p.ID, time.Minute)
	if c.App != "consumer" || c.Targeted != 1200 || c.Succeeded != 1200 || p.App != "partner" || p.Targeted != 700 || p.Succeeded != 700 {
		t.Fatalf("consumer %s %d/%d, partner %s %d/%d; want consumer 1200/1200, partner 700/700", c.App, c.Succeeded, c.Targeted, p.App, p.Succeeded, p.Targeted)
	}
	if got := s.Emu.Stats().Accepted; got != 1200 {
		t.Fatalf("consumer's emulator accepted %d, want 1200", got)
	}
	if got := partnerEmu.Stats().Accepted; got != 700 {
		t.Fatalf("partner's emulator accepted %d, want 700", got)
	}
	for i := 1; i <= 1900; i++ {
		name, own, other := fmt.Sprintf("c-%d", i), s.Emu, partnerEmu
		if i > 1200 {
			name, own, other = fmt.Sprintf("p-%d", i), partnerEmu, s.Emu
		}
		if own.Counts(name).Accepted != 1 || other.Counts(name).Attempts != 0 {
			t.Fatalf("token %s: own project accepted %d, the other project saw %d attempts; want 1 and 0", name, own.Counts(name).Accepted, other.Counts(name).Attempts)
		}
	}
	var st struct {
		Broadcasts, Targeted, Succeeded int64
	}
	s.Do(http.MethodGet, "/push/stats?app=partner", nil, &st)
	if st.Broadcasts != 1 || st.Targeted != 700 || st.Succeeded != 700 {
		t.Fatalf("stats of partner %+v, want 1 broadcast, 700 targeted and succeeded", st)
	}
	var list struct {
		Broadcasts []teststack.Broadcast `json:"broadcasts"`
	}
	s.Do(http.MethodGet, "/push/broadcasts?app=consumer", nil, &list)
	if len(list.Broadcasts) != 1 || list.Broadcasts[0].ID != c.ID {
		t.Fatalf("broadcasts of consumer: %+v, want only %d", list.Broadcasts, c.ID)
	}
}

// With several apps, a request must name a configured one.
func TestARequestNamesAConfiguredApp(t *testing.T) {
	t.Parallel()
	s, _ := appsStack(t, 1, 1)
	for _, c := range []struct {
		body map[string]any
		code string
	}{
		{map[string]any{"title": "x", "audience": map[string]any{"all": true}}, "missing_field"},
		{map[string]any{"app": "nope", "title": "x", "audience": map[string]any{"all": true}}, "unknown_app"},
	} {
		var e teststack.ErrorBody
		if r := s.Do(http.MethodPost, "/push/broadcast", c.body, &e); r.StatusCode != http.StatusBadRequest || e.Error.Field != "app" || e.Error.Code != c.code {
			t.Errorf("%v: %d %+v, want 400 %s on field app", c.body, r.StatusCode, e, c.code)
		}
	}
	var e teststack.ErrorBody
	if r := s.Do(http.MethodGet, "/push/stats?app=nope", nil, &e); r.StatusCode != http.StatusBadRequest || e.Error.Field != "app" {
		t.Errorf("stats of an unknown app: %d %+v, want 400 on field app", r.StatusCode, e)
	}
}

// A token limited to some apps gets 403 on every route of another app's,
// and sees only its apps in lists and counts.
func TestATokenLimitedToAnAppGets403OnAnother(t *testing.T) {
	t.Parallel()
	const limited = "partner-ops-secret-0123456789"
	s, _ := appsStack(t, 5, 3, "pops:approver:"+limited+":partner")
	var c, p teststack.Broadcast
	s.Do(http.MethodPost, "/push/broadcast", map[string]any{"app": "consumer", "title": "c", "audience": map[string]any{"all": true}}, &c)
	if r := s.DoAuth(http.MethodPost, "/push/broadcast", limited, map[string]any{"app": "partner", "title": "p", "audience": map[string]any{"all": true}}, &p); r.StatusCode != http.StatusOK {
		t.Fatalf("the limited token's own app: %d", r.StatusCode)
	}
	c = s.WaitFinished(c.ID, time.Minute)
	forbidden := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/push/broadcast", map[string]any{"app": "consumer", "title": "x", "audience": map[string]any{"all": true}}},
		{http.MethodPost, "/push/test", map[string]any{"app": "consumer", "title": "x", "tokens": []string{"c-1"}}},
		{http.MethodPost, "/push/preview", map[string]any{"app": "consumer", "audience": map[string]any{"all": true}}},
		{http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", c.ID), nil},
		{http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", c.ID), nil},
		{http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/release", c.ID), nil},
		{http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/resend", c.ID), map[string]any{}},
		{http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/test", c.ID), map[string]any{"tokens": []string{"c-1"}}},
		{http.MethodGet, fmt.Sprintf("/push/broadcasts/%d/failures", c.ID), nil},
		{http.MethodGet, fmt.Sprintf("/push/broadcasts/%d/engagement", c.ID), nil},
		{http.MethodGet, fmt.Sprintf("/push/broadcasts/%d/events", c.ID), nil},
		{http.MethodGet, "/push/broadcasts?app=consumer", nil},
		{http.MethodGet, "/push/stats?app=consumer", nil},
		{http.MethodGet, "/push/webhooks", nil},
	}
	for _, f := range forbidden {
		var e teststack.ErrorBody
		if r := s.DoAuth(f.method, f.path, limited, f.body, &e); r.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden_app" {
			t.Errorf("%s %s: %d %+v, want 403 forbidden_app", f.method, f.path, r.StatusCode, e)
		}
	}
	var list struct {
		Broadcasts []teststack.Broadcast `json:"broadcasts"`
	}
	s.DoAuth(http.MethodGet, "/push/broadcasts", limited, nil, &list)
	if len(list.Broadcasts) != 1 || list.Broadcasts[0].ID != p.ID {
		t.Fatalf("the limited token lists %+v, want only its app's broadcast %d", list.Broadcasts, p.ID)
	}
	var st struct{ Broadcasts, Targeted int64 }
	s.DoAuth(http.MethodGet, "/push/stats", limited, nil, &st)
	if st.Broadcasts != 1 || st.Targeted != 3 {
		t.Fatalf("the limited token's stats %+v, want its app's 1 broadcast of 3 targets", st)
	}
	var apps struct {
		Apps []struct {
			Name string `json:"name"`
		} `json:"apps"`
	}
	s.DoAuth(http.MethodGet, "/push/apps", limited, nil, &apps)
	if len(apps.Apps) != 1 || apps.Apps[0].Name != "partner" {
		t.Fatalf("the limited token's apps %+v, want partner only", apps.Apps)
	}
	s.Do(http.MethodGet, "/push/apps", nil, &apps)
	if len(apps.Apps) != 2 {
		t.Fatalf("an unlimited token's apps %+v, want both", apps.Apps)
	}
}

// An app may have tables of its own (apps[].schema): its broadcasts read
// them, and write their dead tokens back to them, while the other app
// reads the bundled tables, each only its own.
func TestAnAppWithTablesOfItsOwn(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, func(c *config.Config, db string) {
		m := mapping(db)
		c.Schema = model.SchemaMapping{}
		c.Apps = []config.App{{Name: "default", ProjectID: "acme"}, {Name: "legacy", ProjectID: "acme-legacy", Schema: &m}}
	})
	toks, eligible := appPopulation(s, db, "legacy-", 40, func(i int) bool { return i%3 == 0 })
	s.SeedTokens(1, []string{"bundled-1", "bundled-2"})
	var l, d teststack.Broadcast
	s.Do(http.MethodPost, "/push/broadcast", map[string]any{"app": "legacy", "title": "t", "audience": map[string]any{"all": true}}, &l)
	s.Do(http.MethodPost, "/push/broadcast", map[string]any{"app": "default", "title": "t", "audience": map[string]any{"all": true}}, &d)
	l = s.WaitFinished(l.ID, time.Minute)
	d = s.WaitFinished(d.ID, time.Minute)
	var want, dead int64
	for i, ok := range eligible {
		if ok {
			want++
			if i%3 == 0 {
				dead++
			}
		}
	}
	if l.Targeted != want || l.Succeeded != want-dead || l.InvalidatedTokens != dead {
		t.Fatalf("legacy: %d targeted, %d succeeded, %d invalidated; want %d, %d, %d", l.Targeted, l.Succeeded, l.InvalidatedTokens, want, want-dead, dead)
	}
	if d.Targeted != 2 || d.Succeeded != 2 {
		t.Fatalf("default: %d targeted, %d succeeded; want the 2 bundled tokens", d.Targeted, d.Succeeded)
	}
	for i, tok := range toks {
		if got, w := s.Emu.Counts(tok).Attempts, map[bool]int64{true: 1}[eligible[i]]; got != w {
			t.Errorf("legacy member %d (%s): %d attempts, want %d", i, tok, got, w)
		}
	}
	var written int64
	if err := s.SQL.QueryRow("SELECT COUNT(*) FROM " + db + ".push_devices WHERE dead_code = 'UNREGISTERED'").Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written != dead {
		t.Fatalf("%d dead tokens written back to the legacy app's table, want %d", written, dead)
	}
}

// The cluster view lists the running chunks of the app asked for only: a
// token limited to partner sees partner's chunk, never consumer's, and
// consumer's view (for a token with every app) shows consumer's only.
func TestTheClusterViewListsOneAppsChunks(t *testing.T) {
	t.Parallel()
	const limited = "partner-view-secret-0123456789"
	s, _ := appsStack(t, 400, 400, "pview:viewer:"+limited+":partner")
	ids := map[string]uint64{}
	for _, app := range []string{"consumer", "partner"} {
		var b teststack.Broadcast
		// Paced: each runs for minutes, under a lease, while the views are read.
		if r := s.Do(http.MethodPost, "/push/broadcast?wait=0", map[string]any{"app": app, "title": app, "audience": map[string]any{"all": true}, "max_rate": 2}, &b); r.StatusCode != http.StatusAccepted {
			t.Fatalf("%s broadcast: %d", app, r.StatusCode)
		}
		ids[app] = b.ID
		defer s.Do(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil)
	}
	type view struct {
		App    string `json:"app"`
		Chunks []struct {
			BroadcastID uint64 `json:"broadcast_id"`
		} `json:"chunks"`
	}
	read := func(token, app string) view {
		var v view
		if r := s.DoAuth(http.MethodGet, "/push/cluster?app="+app, token, nil, &v); r.StatusCode != http.StatusOK {
			t.Fatalf("GET /push/cluster?app=%s: %d", app, r.StatusCode)
		}
		return v
	}
	for _, w := range []struct{ token, app string }{{limited, "partner"}, {teststack.AdminToken, "consumer"}} {
		var v view
		teststack.WaitEvery(t, w.app+"'s running chunk in its cluster view", 20*time.Second, 100*time.Millisecond, func() bool {
			v = read(w.token, w.app)
			return len(v.Chunks) > 0
		})
		for _, c := range v.Chunks {
			if c.BroadcastID != ids[w.app] {
				t.Fatalf("the cluster view of %s lists a chunk of broadcast %d; want only %s's broadcast %d (%+v)", w.app, c.BroadcastID, w.app, ids[w.app], v)
			}
		}
	}
	var e teststack.ErrorBody
	if r := s.DoAuth(http.MethodGet, "/push/cluster?app=consumer", limited, nil, &e); r.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden_app" {
		t.Fatalf("the limited token's view of consumer: %d %+v, want 403 forbidden_app", r.StatusCode, e)
	}
}

// The app check fails closed: a broadcast of another app whose row cannot
// be read (here its message is not an object; in production a timeout)
// is refused to a token limited to its own apps, and stays as it was;
// only a broadcast that does not exist goes on to the handler's 404.
func TestTheAppCheckFailsClosed(t *testing.T) {
	t.Parallel()
	const limited = "partner-ops-secret-0123456789"
	s, _ := appsStack(t, 5, 3, "pops:approver:"+limited+":partner")
	var c teststack.Broadcast
	s.Do(http.MethodPost, "/push/broadcast?wait=0", map[string]any{"app": "consumer", "title": "c", "audience": map[string]any{"all": true}, "hold": true}, &c)
	if c.Status != "held" {
		t.Fatalf("consumer's broadcast: %+v, want held", c)
	}
	s.MustExec(fmt.Sprintf("UPDATE broadcasts SET message = '[1]' WHERE id = %d", c.ID))
	var e teststack.ErrorBody
	if r := s.DoAuth(http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", c.ID), limited, nil, &e); r.StatusCode < 500 {
		t.Fatalf("cancel of another app's unreadable broadcast: %d %+v, want refused with a 5xx", r.StatusCode, e)
	}
	var status string
	if err := s.SQL.QueryRow("SELECT status FROM broadcasts WHERE id = ?", c.ID).Scan(&status); err != nil || status != "held" {
		t.Fatalf("the broadcast is %q (%v), want still held", status, err)
	}
	if r := s.DoAuth(http.MethodPost, "/push/broadcasts/999999/cancel", limited, nil, &e); r.StatusCode != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Fatalf("cancel of no broadcast: %d %+v, want 404 not_found", r.StatusCode, e)
	}
}
