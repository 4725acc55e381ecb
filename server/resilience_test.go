package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

func tokens(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestQuotaStormEveryTokenDeliveredOnce(t *testing.T) {
	coveredBy(t, "fanout (TestQuotaPausesEveryWorker)")
	s := teststack.New(t, teststack.Options{
		Emulator: fcmemu.Config{StormAfter: 1500, StormFor: 2 * time.Second},
		Configure: func(c *config.Config) {
			c.Engine.Concurrency = 64
			c.Engine.RetryMaxDelay = time.Minute
			c.Engine.MaxAttempts = 10
		},
	})
	toks := tokens("storm-", 4000)
	s.SeedTokens(1, toks)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if b.Status != "completed" || b.Targeted != 4000 || b.Succeeded != 4000 || b.Failed != 0 {
		t.Fatalf("broadcast %+v", b)
	}
	var retried int
	for _, tk := range toks {
		c := s.Emu.Counts(tk)
		if c.Accepted != 1 {
			t.Fatalf("token %s accepted %d times", tk, c.Accepted)
		}
		if c.Attempts > 1 {
			retried++
		}
	}
	st := s.Emu.Stats()
	if st.ByCode["RATE_LIMIT_EXCEEDED"] == 0 || retried == 0 {
		t.Fatalf("no storm happened: %+v", st)
	}
	if st.RequestsDuringBackoff != 0 {
		t.Fatalf("%d requests arrived inside an announced Retry-After window", st.RequestsDuringBackoff)
	}
	t.Logf("storm: %d tokens retried, %d 429 answers, %d requests for 4000 tokens", retried, st.ByCode["RATE_LIMIT_EXCEEDED"], st.Requests)
}

func TestFlappingTokensDeliveredWithinBudget(t *testing.T) {
	coveredBy(t, "fanout (TestRetriesStopAtMaxAttempts, TestRunCountsEveryOutcomeExactly)")
	for _, client := range []string{"direct", "sdk"} { // PUSHFAN_FCM_CLIENT
		t.Run(client, func(t *testing.T) {
			s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.MaxAttempts = 4; c.FCMClient = client }})
			s.SeedTokens(1, []string{
				"flaky1xunavailable-a", // one 503: a retry (the SDK's own with sdk, the engine's with direct) delivers it
				"flaky3xinternal-b",    // three 500s: our retries deliver it on the 4th request
				"flaky2xquota-c",       // two per-token 429s (FcmError shape)
				"internal-always",      // never works: exactly MaxAttempts requests
				"unavailable-always",   // never works, and with sdk the SDK retries 503 itself: still MaxAttempts
				"ok-1",
			})
			var b teststack.Broadcast
			s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
			want := map[string]fcmemu.TokenCounts{
				"flaky1xunavailable-a": {Attempts: 2, Accepted: 1},
				"flaky3xinternal-b":    {Attempts: 4, Accepted: 1},
				"flaky2xquota-c":       {Attempts: 3, Accepted: 1},
				"internal-always":      {Attempts: 4},
				"unavailable-always":   {Attempts: 4},
				"ok-1":                 {Attempts: 1, Accepted: 1},
			}
			for tk, w := range want {
				if got := s.Emu.Counts(tk); got.Attempts != w.Attempts || got.Accepted != w.Accepted {
					t.Errorf("%s: %+v, want %+v", tk, got, w)
				}
			}
			if b.Succeeded != 4 || b.Failed != 2 || b.Errors["INTERNAL"] != 1 || b.Errors["UNAVAILABLE"] != 1 || b.InvalidatedTokens != 0 {
				t.Fatalf("broadcast %+v", b)
			}
			var page struct {
				Failures []struct {
					Code     string `json:"code"`
					Attempts int    `json:"attempts"`
				} `json:"failures"`
			}
			s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/failures", b.ID), nil, &page)
			if len(page.Failures) != 2 || page.Failures[0].Attempts != 4 || page.Failures[1].Attempts != 4 {
				t.Fatalf("failures %+v, want two with 4 attempts", page.Failures)
			}
		})
	}
}

func TestAuthErrorStopsBroadcastEarly(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.Concurrency = 8 }})
	s.SeedTokens(1, tokens("auth-", 5000))
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	sent := s.Emu.Stats().Requests
	if b.Status != "failed" || b.Error == nil || !strings.Contains(*b.Error, "THIRD_PARTY_AUTH_ERROR") {
		t.Fatalf("broadcast %+v", b)
	}
	if sent > 100 {
		t.Fatalf("%d requests sent after the first THIRD_PARTY_AUTH_ERROR", sent)
	}
	if b.Targeted != 5000 || b.Succeeded+b.Failed+b.Canceled != b.Targeted || b.Failed != sent || b.Errors["THIRD_PARTY_AUTH_ERROR"] != sent {
		t.Fatalf("counts do not add up: %+v (sent %d)", b, sent)
	}
}

func TestHangingTokensTimeOutAndBroadcastCompletes(t *testing.T) {
	coveredBy(t, "fanout (TestSendTimeoutApplies)")
	for _, client := range []string{"direct", "sdk"} { // PUSHFAN_FCM_CLIENT
		t.Run(client, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
				c.Engine.SendTimeout = timeout
				c.Engine.MaxAttempts = 2
				c.FCMClient = client
			}})
			s.SeedTokens(1, append(tokens("hang-", 10), tokens("ok-", 200)...))
			start := time.Now()
			var b teststack.Broadcast
			s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
			took := time.Since(start)
			if b.Status != "completed" || b.Succeeded != 200 || b.Failed != 10 || b.Errors["TIMEOUT"] != 10 {
				t.Fatalf("broadcast %+v", b)
			}
			for _, tk := range tokens("hang-", 10) {
				if c := s.Emu.Counts(tk); c.Attempts != 2 {
					t.Fatalf("%s: %d attempts, want 2", tk, c.Attempts)
				}
			}
			// timeout × attempts + backoff + generous slack for a loaded machine.
			if limit := 2*timeout + 10*time.Second; took > limit {
				t.Fatalf("broadcast took %v, more than %v: the send timeout did not apply", took, limit)
			}
		})
	}
}

func TestCancelMidBroadcast(t *testing.T) {
	coveredBy(t, "lease (TestStopClosesPendingChunksAndIsIdempotent, TestCancelRacingACheckpoint) and broadcast/plan (TestACancelMidPlanStopsIt)")
	s := teststack.New(t, teststack.Options{
		Emulator:  fcmemu.Config{Latency: 20 * time.Millisecond},
		Configure: func(c *config.Config) { c.Engine.Concurrency = 8 },
	})
	s.SeedTokens(1, tokens("ok-", 5000))
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != fmt.Sprintf("/push/broadcasts/%d", b.ID) {
		t.Fatalf("submit: %d %v", resp.StatusCode, resp.Header)
	}
	waitUntil(t, "200 sends checkpointed before the cancel", time.Minute, func() bool {
		var cur teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &cur)
		if cur.Succeeded >= 200 {
			return true
		}
		if cur.Status != "running" && cur.Status != "queued" && cur.Status != "planning" {
			t.Fatalf("broadcast ended before cancel: %+v", cur)
		}
		return false
	})
	var c teststack.Broadcast
	start := time.Now()
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c); resp.StatusCode != 200 {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("cancel took %v", took)
	}
	accepted := s.Emu.Stats().Accepted
	if c.Status != "canceled" || c.Canceled == 0 || c.Succeeded+c.Failed+c.Canceled != c.Targeted || c.Targeted != 5000 {
		t.Fatalf("after cancel: %+v", c)
	}
	if c.Succeeded != accepted {
		t.Fatalf("succeeded %d, emulator accepted %d", c.Succeeded, accepted)
	}
	// Nothing is sent after the cancel answered: stop the only instance
	// that ran the broadcast. Stop returns once its chunk runs and their
	// sends have ended, so the emulator's total now is final for this
	// instance, however late a stray send would have come.
	stopCtx, stopCancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer stopCancel()
	if err := s.Service.Stop(stopCtx); err != nil {
		t.Fatalf("stopping the instance that ran the canceled broadcast: %v", err)
	}
	if later := s.Emu.Stats().Accepted; later != accepted {
		t.Fatalf("sends continued after cancel: %d -> %d", accepted, later)
	}
	// The rest goes through a second instance (the first no longer runs
	// broadcasts); its sends are counted at the end too.
	other := s.AddInstance().API.URL
	// A second cancel (a client retrying after a lost answer) answers the
	// canceled broadcast, unchanged.
	var again teststack.Broadcast
	if resp := s.DoURL(other, "POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &again); resp.StatusCode != 200 || again.Status != "canceled" || again.Canceled != c.Canceled {
		t.Fatalf("second cancel: %d %+v", resp.StatusCode, again)
	}
	var e teststack.ErrorBody
	if resp := s.DoURL(other, "POST", "/push/broadcasts/999999/cancel", nil, &e); resp.StatusCode != 404 {
		t.Fatalf("cancel unknown: %d", resp.StatusCode)
	}
	var done teststack.Broadcast
	s.DoURL(other, "POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"user_ids": []uint64{1}}}, &done)
	if resp := s.DoURL(other, "POST", fmt.Sprintf("/push/broadcasts/%d/cancel", done.ID), nil, &e); done.Status != "completed" || resp.StatusCode != 409 || e.Error.Code != "already_finished" {
		t.Fatalf("cancel of a completed broadcast (%s): %d %+v", done.Status, resp.StatusCode, e)
	}
	// The second instance sent the new broadcast's one target and nothing
	// of the canceled one (both broadcasts are final now).
	if got := s.Emu.Stats().Accepted; got != accepted+done.Succeeded || done.Succeeded != 1 {
		t.Fatalf("emulator accepted %d, want %d at the cancel + %d of the later broadcast", got, accepted, done.Succeeded)
	}
}

// The failures page by keyset, filtered by code, by user or both (user
// 7 has five failed devices: paged two at a time); the CSV export of the
// failed outcomes takes the same filters; every bad value is a 400 naming
// its parameter.
func TestFailuresEndpointPaginationAndFilter(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, append(append(tokens("unregistered-", 30), tokens("invalid-", 20)...), tokens("ok-", 10)...))
	// User 7 (unregistered-6) has four more devices, two of which fail.
	s.MustExec("INSERT INTO device_tokens (user_id, token) VALUES (7, 'unregistered-u7-a'), (7, 'unregistered-u7-b'), (7, 'invalid-u7-a'), (7, 'invalid-u7-b'), (7, 'ok-u7')")
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	type page struct {
		Failures []struct {
			TokenID  uint64 `json:"token_id"`
			UserID   uint64 `json:"user_id"`
			Code     string `json:"code"`
			Message  string `json:"message"`
			Attempts int    `json:"attempts"`
		} `json:"failures"`
		NextCursor *string `json:"next_cursor"`
	}
	collect := func(limit int, query string) (map[uint64]string, int) {
		seen := map[uint64]string{}
		pages := 0
		cursor := ""
		for {
			if pages > 100 { // 8 expected: a cursor that does not advance would loop forever
				t.Fatalf("still paging after %d pages", pages)
			}
			var p page
			path := fmt.Sprintf("/push/broadcasts/%d/failures?limit=%d%s", b.ID, limit, query)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			if resp := s.Do("GET", path, nil, &p); resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d", path, resp.StatusCode)
			}
			pages++
			for _, f := range p.Failures {
				if _, dup := seen[f.TokenID]; dup {
					t.Fatalf("token %d on two pages", f.TokenID)
				}
				if f.Message == "" || f.Attempts != 1 || f.UserID == 0 {
					t.Fatalf("failure detail incomplete: %+v", f)
				}
				if strings.Contains(query, "user_id=7") && f.UserID != 7 {
					t.Fatalf("user filter leaked user %d", f.UserID)
				}
				seen[f.TokenID] = f.Code
			}
			if p.NextCursor == nil {
				return seen, pages
			}
			cursor = *p.NextCursor
		}
	}
	all, pages := collect(7, "")
	if len(all) != 54 || pages != 8 {
		t.Fatalf("%d failures over %d pages, want 54 over 8", len(all), pages)
	}
	unreg, _ := collect(7, "&code=UNREGISTERED")
	if len(unreg) != 32 {
		t.Fatalf("%d UNREGISTERED failures, want 32", len(unreg))
	}
	for _, code := range unreg {
		if code != "UNREGISTERED" {
			t.Fatalf("filter leaked code %s", code)
		}
	}
	if mine, pages := collect(2, "&user_id=7"); len(mine) != 5 || pages != 3 {
		t.Fatalf("user 7: %d failures over %d pages, want 5 over 3", len(mine), pages)
	}
	mine, _ := collect(2, "&user_id=7&code=INVALID_ARGUMENT")
	if len(mine) != 2 {
		t.Fatalf("user 7's INVALID_ARGUMENT failures: %d, want 2", len(mine))
	}
	for _, code := range mine {
		if code != "INVALID_ARGUMENT" {
			t.Fatalf("filter leaked code %s", code)
		}
	}
	if none, pages := collect(7, "&user_id=55"); len(none) != 0 || pages != 1 {
		t.Fatalf("user 55 (delivered): %d failures over %d pages", len(none), pages)
	}
	// The CSV export of the failed outcomes: the same filters.
	for query, want := range map[string][]string{
		"&user_id=7":                       {"7,UNREGISTERED", "7,UNREGISTERED", "7,UNREGISTERED", "7,INVALID_ARGUMENT", "7,INVALID_ARGUMENT"},
		"&user_id=7&code=INVALID_ARGUMENT": {"7,INVALID_ARGUMENT", "7,INVALID_ARGUMENT"},
		"&user_id=55":                      {},
	} {
		req, err := http.NewRequest("GET", s.API.URL+fmt.Sprintf("/push/broadcasts/%d/outcomes?outcome=failed&format=csv%s", b.ID, query), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
		resp, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("export %s: %d %v %s", query, resp.StatusCode, err, raw)
		}
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		var got []string
		for _, l := range lines[1:] {
			f := strings.Split(l, ",") // user_id,token_id,outcome,code
			if len(f) != 4 || f[2] != "failed" {
				t.Fatalf("export %s: line %q", query, l)
			}
			got = append(got, f[0]+","+f[3])
		}
		slices.Sort(got)
		slices.Sort(want)
		if lines[0] != "user_id,token_id,outcome,code" || !slices.Equal(got, want) {
			t.Fatalf("export %s: %q, want the header and %q", query, lines, want)
		}
	}
	for query, want := range map[string][2]string{
		"?cursor=abc":    {"invalid_cursor", "cursor"},
		"?code=NOPE":     {"unknown_code", "code"},
		"?limit=0":       {"invalid_value", "limit"},
		"?limit=10000":   {"invalid_value", "limit"},
		"?user_id=0":     {"invalid_value", "user_id"},
		"?user_id=-3":    {"invalid_value", "user_id"},
		"?user_id=seven": {"invalid_value", "user_id"},
	} {
		for _, route := range []string{"failures", "outcomes"} {
			if route == "outcomes" && (want[1] == "cursor" || want[1] == "limit") {
				continue // the export has no pages
			}
			var e teststack.ErrorBody
			if resp := s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/%s%s", b.ID, route, query), nil, &e); resp.StatusCode != 400 || e.Error.Code != want[0] || e.Error.Field != want[1] {
				t.Fatalf("%s%s: %d %+v, want 400 %s naming %s", route, query, resp.StatusCode, e, want[0], want[1])
			}
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("GET", "/push/broadcasts/777777/failures", nil, &e); resp.StatusCode != 404 {
		t.Fatalf("failures of unknown broadcast: %d", resp.StatusCode)
	}
}

func TestDryRunSendsNothingAndInvalidatesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, append(tokens("unregistered-", 5), tokens("ok-", 20)...))
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "dry_run": true, "audience": map[string]any{"all": true}}, &b)
	st := s.Emu.Stats()
	if !b.DryRun || b.Succeeded != 20 || b.Failed != 5 || b.InvalidatedTokens != 0 || st.Accepted != 0 || st.Validated != 20 {
		t.Fatalf("dry run %+v, emulator %+v", b, st)
	}
	var stats struct {
		Broadcasts int64 `json:"broadcasts"`
		DryRuns    int64 `json:"dry_runs"`
	}
	s.Do("GET", "/push/stats", nil, &stats)
	if stats.Broadcasts != 0 || stats.DryRuns != 1 {
		t.Fatalf("stats %+v: a dry run must not count as a sent broadcast", stats)
	}
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "dry_run": true, "invalidate_on_dry_run": true, "audience": map[string]any{"all": true}}, &b)
	if b.InvalidatedTokens != 5 || s.Emu.Stats().Accepted != 0 {
		t.Fatalf("dry run with invalidation %+v", b)
	}
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if b.Targeted != 20 || b.Failed != 0 {
		t.Fatalf("after invalidation the real send targets %d (failed %d), want 20", b.Targeted, b.Failed)
	}
}

func TestServerTimeoutsApply(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.HTTP.ReadHeaderTimeout = 200 * time.Millisecond
		c.HTTP.IdleTimeout = 300 * time.Millisecond
	}})
	addr := strings.TrimPrefix(s.API.URL, "http://")
	// A client that never finishes its headers is cut off.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("slow-header connection held for %v", took)
	}
	// An idle keep-alive connection is closed.
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := conn2.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn2.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := conn2.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Fatalf("healthz answer %q", buf[:n])
	}
	start = time.Now()
	for {
		if _, err := conn2.Read(buf); err != nil {
			break
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("idle connection held for %v", took)
	}
}

func TestDatabaseDeadlineApplies(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.DB.Timeout = 300 * time.Millisecond }})
	// Another session holds a write lock on broadcasts: reads of it block.
	conn, err := s.SQL.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "LOCK TABLES broadcasts WRITE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var e teststack.ErrorBody
	resp := s.Do("GET", "/push/broadcasts/1", nil, &e)
	took := time.Since(start)
	_, _ = conn.ExecContext(t.Context(), "UNLOCK TABLES")
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "database_timeout" {
		t.Fatalf("blocked read: %d %+v", resp.StatusCode, e)
	}
	if took > 5*time.Second {
		t.Fatalf("blocked read answered after %v", took)
	}
}
