package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// stalePreview is a preview's answer, with the count the stale rule left out.
type stalePreview struct {
	Count int64  `json:"count"`
	Stale *int64 `json:"stale"`
}

// With PUSHFAN_STALE_AFTER=30d, a broadcast to all and one to a named
// audience whose query knows nothing of the rule each reach exactly the
// tokens refreshed within 30 days (counted at the emulator, token by
// token); the previews count the stale ones apart; the metric counts
// what the sends left out; invalidated tokens stay out as before; a test
// send leaves a user's stale token out and sends a raw one, marked stale.
func TestStaleTokensAreNotSentTo(t *testing.T) {
	t.Parallel()
	const sql = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
		"WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.StaleAfter = 30 * 24 * time.Hour
		c.Engine.PageSize = 100 // pages the rule leaves short read on
		c.Engine.ChunkWidth = 500
		c.Audiences = []config.Audience{{Name: "everyone", SQL: sql}}
	}})
	// 1,200 users with a token each (token id = user id): every 4th and
	// ids 301..520 not refreshed for 40 days, every 10th invalidated, the
	// rest refreshed 29 days ago.
	const n = 1200
	stale := func(i int) bool { return i%4 == 0 || (i > 300 && i <= 520) }
	s.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", n))
	s.MustExec(fmt.Sprintf(`INSERT INTO device_tokens (id, user_id, token, invalidated_at, updated_at)
		SELECT seq, seq, CONCAT('st-', seq), IF(seq %% 10 = 0, NOW(6), NULL),
		IF(seq %% 4 = 0 OR seq BETWEEN 301 AND 520, NOW(6) - INTERVAL 40 DAY, NOW(6) - INTERVAL 29 DAY) FROM seq_1_to_%d`, n))
	var fresh, staleN int64
	for i := 1; i <= n; i++ {
		switch {
		case i%10 == 0:
		case stale(i):
			staleN++
		default:
			fresh++
		}
	}

	for _, c := range []struct {
		what, path string
		body       map[string]any
	}{
		{"all", "/push/preview", map[string]any{"audience": map[string]any{"all": true}}},
		{"a named audience", "/push/audiences/everyone/preview", map[string]any{}},
		{"a named audience (compose)", "/push/preview", map[string]any{"audience": map[string]any{"name": "everyone"}}},
	} {
		var p stalePreview
		if resp := s.Do("POST", c.path, c.body, &p); resp.StatusCode != http.StatusOK || p.Count != fresh || p.Stale == nil || *p.Stale != staleN {
			t.Fatalf("preview of %s: HTTP %d %+v (stale %v), want count %d, stale %d", c.what, resp.StatusCode, p, p.Stale, fresh, staleN)
		}
	}

	for round, audience := range []map[string]any{{"all": true}, {"name": "everyone"}} {
		var b teststack.Broadcast
		if resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "t", "body": "b", "audience": audience}, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit %v: %d", audience, resp.StatusCode)
		}
		b = s.WaitFinished(b.ID, 30*time.Second)
		if b.Status != "completed" || b.Targeted != fresh || b.Succeeded != fresh || b.Failed != 0 {
			t.Fatalf("broadcast to %v: %+v, want completed, targeted = succeeded = %d", audience, b, fresh)
		}
		want := int64(round + 1) // each broadcast once to each fresh token
		for i := 1; i <= n; i++ {
			c := s.Emu.Counts(fmt.Sprintf("st-%d", i))
			switch {
			case i%10 == 0 || stale(i):
				if c.Attempts != 0 {
					t.Fatalf("after %v: token st-%d (stale or invalidated) got %+v, want nothing", audience, i, c)
				}
			case c.Accepted != want || c.Attempts != want:
				t.Fatalf("after %v: token st-%d got %+v, want %d accepted", audience, i, c, want)
			}
		}
	}
	if got := s.Emu.Stats().Accepted; got != 2*fresh {
		t.Fatalf("the emulator accepted %d, want %d", got, 2*fresh)
	}
	var m map[string]float64
	waitUntil(t, "the stale tokens in the metrics", 10*time.Second, func() bool {
		m = scrape(t, s.HTTP, s.API.URL+"/metrics", teststack.AdminToken)
		return m[`pushfan_stale_tokens_skipped_total{app="default"}`] >= float64(2*staleN)
	})
	if got := m[`pushfan_stale_tokens_skipped_total{app="default"}`]; got != float64(2*staleN) {
		t.Fatalf("pushfan_stale_tokens_skipped_total = %v, want %d (each broadcast's stale tokens once)", got, 2*staleN)
	}

	// A test send: user 4's only token is stale, user 5's fresh; the raw
	// stale token st-8 is sent all the same (the operator holds the
	// device), and says so.
	var ts struct {
		Results []struct {
			TokenStatus string `json:"token_status"`
			Outcome     string `json:"outcome"`
		} `json:"results"`
		UsersWithoutTokens []struct {
			UserID uint64 `json:"user_id"`
			Reason string `json:"reason"`
		} `json:"users_without_tokens"`
	}
	if resp := s.Do("POST", "/push/test", map[string]any{"title": "t", "body": "b", "user_ids": []int{4, 5}}, &ts); resp.StatusCode != http.StatusOK ||
		len(ts.Results) != 1 || ts.Results[0].Outcome != "succeeded" || len(ts.UsersWithoutTokens) != 1 ||
		ts.UsersWithoutTokens[0].UserID != 4 || ts.UsersWithoutTokens[0].Reason != "no_valid_tokens" {
		t.Fatalf("test send to users 4 and 5: HTTP %d %+v, want user 5's token sent, user 4 without tokens", resp.StatusCode, ts)
	}
	if c4, c5 := s.Emu.Counts("st-4"), s.Emu.Counts("st-5"); c4.Attempts != 0 || c5.Accepted != 3 {
		t.Fatalf("test send: st-4 %+v (want nothing), st-5 %+v (want a third)", c4, c5)
	}
	if resp := s.Do("POST", "/push/test", map[string]any{"title": "t", "body": "b", "tokens": []string{"st-8"}}, &ts); resp.StatusCode != http.StatusOK ||
		len(ts.Results) != 1 || ts.Results[0].TokenStatus != "stale" || ts.Results[0].Outcome != "succeeded" {
		t.Fatalf("test send to the raw stale token: HTTP %d %+v, want sent, token_status stale", resp.StatusCode, ts)
	}
	if c := s.Emu.Counts("st-8"); c.Accepted != 1 {
		t.Fatalf("the raw stale token: %+v, want 1 accepted", c)
	}
}
