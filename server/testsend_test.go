package server_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// testSendAnswer is POST /push/test's answer as a client reads it.
type testSendAnswer struct {
	Results []struct {
		Token       string  `json:"token"`
		TokenID     *uint64 `json:"token_id"`
		UserID      *uint64 `json:"user_id"`
		Platform    *string `json:"platform"`
		TokenStatus string  `json:"token_status"`
		Outcome     string  `json:"outcome"`
		Code        *string `json:"code"`
		Message     *string `json:"message"`
		MessageID   *string `json:"message_id"`
		Attempts    int     `json:"attempts"`
		Invalidated bool    `json:"invalidated"`
	} `json:"results"`
	UsersWithoutTokens []struct {
		UserID        uint64     `json:"user_id"`
		Reason        string     `json:"reason"`
		InvalidatedAt *time.Time `json:"invalidated_at"`
		InvalidReason *string    `json:"invalid_reason"`
	} `json:"users_without_tokens"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

type statsAnswer struct {
	Broadcasts        int64            `json:"broadcasts"`
	DryRuns           int64            `json:"dry_runs"`
	Targeted          int64            `json:"targeted"`
	Succeeded         int64            `json:"succeeded"`
	Failed            int64            `json:"failed"`
	Canceled          int64            `json:"canceled"`
	InvalidatedTokens int64            `json:"invalidated_tokens"`
	Errors            map[string]int64 `json:"errors"`
}

// A test send to a live, a dead, an unknown and a flaky token, through
// both FCM clients: exact per-token results, exactly the requests the
// emulator saw, the dead token invalidated, and no trace in the stats.
// Then by user ids: the dead user is now reported without tokens, as are
// a disabled, a tokenless and an unknown user.
func TestTestSendReportsEachToken(t *testing.T) {
	t.Parallel()
	const (
		live    = "ok-live-device-token-000001"
		dead    = "unregistered-device-token-02"
		unknown = "ok-raw-device-never-registered"
		flaky   = "flaky1xunavailable-device-token-04"
		off     = "ok-disabled-user-token-000005"
	)
	for _, client := range []string{"direct", "sdk"} {
		t.Run(client, func(t *testing.T) {
			s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.FCMClient = client }})
			s.SeedTokens(1, []string{live, dead})
			s.SeedTokens(4, []string{flaky})
			s.MustExec("INSERT INTO users (id, push_enabled) VALUES (5, 0), (6, 1)")
			s.MustExec("INSERT INTO device_tokens (user_id, token) VALUES (5, ?)", off)
			var before statsAnswer
			s.Do("GET", "/push/stats", nil, &before)

			var got testSendAnswer
			resp := s.Do("POST", "/push/test", map[string]any{
				"title": "Check", "body": "on your device", "data": map[string]string{"k": "v"},
				"tokens": []string{live, dead, unknown, flaky, live}, // a repeat is sent once
			}, &got)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %+v", resp.StatusCode, got)
			}
			if len(got.Results) != 4 || got.Succeeded != 3 || got.Failed != 1 || len(got.UsersWithoutTokens) != 0 {
				t.Fatalf("answer %+v; want 4 results, 3 succeeded, 1 failed", got)
			}
			type want struct {
				token, status, outcome, code string
				user                         uint64
				attempts                     int
				invalidated                  bool
			}
			wants := []want{
				{live, "valid", "succeeded", "", 1, 1, false},
				{dead, "valid", "failed", "UNREGISTERED", 2, 1, true},
				{unknown, "unknown", "succeeded", "", 0, 1, false},
				{flaky, "valid", "succeeded", "", 4, 2, false}, // UNAVAILABLE once, then accepted
			}
			for i, w := range wants {
				r := got.Results[i]
				if r.Token != w.token[:12]+"…" || strings.Contains(r.Token, w.token) {
					t.Fatalf("result %d shows token %q; want the 12-character prefix of %q", i, r.Token, w.token)
				}
				var user uint64
				if r.UserID != nil {
					user = *r.UserID
				}
				if r.TokenStatus != w.status || r.Outcome != w.outcome || user != w.user || r.Attempts != w.attempts || r.Invalidated != w.invalidated {
					t.Fatalf("result %d (%s): %+v; want %+v", i, w.token, r, w)
				}
				if (r.UserID == nil) != (w.user == 0) || (r.TokenID == nil) != (w.status == "unknown") {
					t.Fatalf("result %d (%s): user_id %v, token_id %v; null exactly when the token is unknown", i, w.token, r.UserID, r.TokenID)
				}
				if w.outcome == "succeeded" {
					if r.MessageID == nil || !strings.HasPrefix(*r.MessageID, "projects/test-project/messages/") || r.Code != nil {
						t.Fatalf("result %d (%s): message id %v, code %v; want FCM's name and no code", i, w.token, r.MessageID, r.Code)
					}
				} else if r.Code == nil || *r.Code != w.code || r.Message == nil || *r.Message == "" || r.MessageID != nil {
					t.Fatalf("result %d (%s): code %v message %v id %v; want %s with FCM's message", i, w.token, r.Code, r.Message, r.MessageID, w.code)
				}
			}
			// Exactly one request per token (two for the flaky one), and
			// nothing to the token no one named.
			for _, w := range wants {
				c := s.Emu.Counts(w.token)
				accepted := int64(0)
				if w.outcome == "succeeded" {
					accepted = 1
				}
				if c.Attempts != int64(w.attempts) || c.Accepted != accepted {
					t.Fatalf("emulator saw %s: %+v; want %d requests, %d accepted", w.token, c, w.attempts, accepted)
				}
			}
			if st := s.Emu.Stats(); st.Requests != 5 || st.Accepted != 3 {
				t.Fatalf("emulator totals %d requests, %d accepted; want 5 and 3", st.Requests, st.Accepted)
			}

			// The dead token is invalidated; the others are untouched.
			var reason sql.NullString
			if err := s.SQL.Get(&reason, "SELECT invalid_reason FROM device_tokens WHERE token = ? AND invalidated_at IS NOT NULL", dead); err != nil || reason.String != "UNREGISTERED" {
				t.Fatalf("dead token: reason %v, err %v; want invalidated as UNREGISTERED", reason, err)
			}
			var stillValid int
			if err := s.SQL.Get(&stillValid, "SELECT COUNT(*) FROM device_tokens WHERE invalidated_at IS NULL"); err != nil || stillValid != 3 {
				t.Fatalf("%d valid tokens (err %v), want 3 (live, flaky, the disabled user's)", stillValid, err)
			}

			// Not a broadcast: no row, and the stats are as they were.
			var rows int
			if err := s.SQL.Get(&rows, "SELECT COUNT(*) FROM broadcasts"); err != nil || rows != 0 {
				t.Fatalf("%d broadcasts rows (err %v), want none", rows, err)
			}
			var after statsAnswer
			s.Do("GET", "/push/stats", nil, &after)
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("stats changed: %+v, before %+v", after, before)
			}

			// By user ids: only user 1's live token goes out, with its
			// platform.
			s.MustExec("UPDATE device_tokens SET platform = 'android' WHERE token = ?", live)
			got = testSendAnswer{}
			resp = s.Do("POST", "/push/test", map[string]any{"body": "again", "user_ids": []uint64{1, 2, 5, 6, 99}}, &got)
			if resp.StatusCode != http.StatusOK || len(got.Results) != 1 || got.Succeeded != 1 {
				t.Fatalf("by user ids: %d %+v", resp.StatusCode, got)
			}
			if r := got.Results[0]; r.UserID == nil || *r.UserID != 1 || r.Outcome != "succeeded" || r.Token != live[:12]+"…" || r.Platform == nil || *r.Platform != "android" {
				t.Fatalf("by user ids: result %+v, want user 1's live token, android", r)
			}
			// User 2's only token was invalidated above (UNREGISTERED):
			// the answer says when and by which code; user 6 never had
			// one, and the others are not about tokens.
			skipped := map[uint64]string{}
			for _, u := range got.UsersWithoutTokens {
				skipped[u.UserID] = u.Reason
				if u.UserID == 2 {
					var at time.Time
					if err := s.SQL.Get(&at, "SELECT invalidated_at FROM device_tokens WHERE token = ?", dead); err != nil {
						t.Fatal(err)
					}
					if u.InvalidatedAt == nil || !u.InvalidatedAt.Equal(at.UTC()) || u.InvalidReason == nil || *u.InvalidReason != "UNREGISTERED" {
						t.Fatalf("user 2: invalidated at %v by %v; want %v by UNREGISTERED", u.InvalidatedAt, u.InvalidReason, at)
					}
				} else if u.InvalidatedAt != nil || u.InvalidReason != nil {
					t.Fatalf("user %d (%s): invalidated at %v by %v; want neither", u.UserID, u.Reason, u.InvalidatedAt, u.InvalidReason)
				}
			}
			wantSkipped := map[uint64]string{2: "no_valid_tokens", 5: "push_disabled", 6: "no_valid_tokens", 99: "unknown_user"}
			if !reflect.DeepEqual(skipped, wantSkipped) {
				t.Fatalf("users without tokens %v, want %v", skipped, wantSkipped)
			}
			if c := s.Emu.Counts(live); c.Attempts != 2 {
				t.Fatalf("live token: %d requests in all, want 2", c.Attempts)
			}
			for _, tok := range []string{dead, off} {
				if c := s.Emu.Counts(tok); c.Attempts != map[string]int64{dead: 1, off: 0}[tok] {
					t.Fatalf("%s: %d requests, want no new one", tok, c.Attempts)
				}
			}
		})
	}
}

// Bad requests are 400s naming the field, and send nothing; a viewer may
// not test-send.
func TestTestSendRejectsBadInput(t *testing.T) {
	s := securityStack(t, 0)
	s.SeedTokens(1, []string{"ok-test-bad-input-0001"})
	many := make([]string, 21)
	for i := range many {
		many[i] = fmt.Sprintf("ok-many-token-%04d", i)
	}
	// A user with 21 tokens: too many once resolved.
	s.MustExec("INSERT INTO users (id, push_enabled) VALUES (50, 1)")
	for _, tok := range many {
		s.MustExec("INSERT INTO device_tokens (user_id, token) VALUES (50, ?)", tok)
	}
	ids := make([]uint64, 21)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	tok := []string{"ok-test-bad-input-0001"}
	cases := []struct {
		name        string
		body        any
		code, field string
	}{
		{"both user_ids and tokens", map[string]any{"body": "x", "user_ids": []int{1}, "tokens": tok}, "invalid_value", "tokens"},
		{"neither", map[string]any{"body": "x"}, "missing_field", "user_ids"},
		{"empty tokens", map[string]any{"body": "x", "tokens": []string{}}, "empty_value", "tokens"},
		{"21 tokens", map[string]any{"body": "x", "tokens": many}, "too_many_tokens", "tokens"},
		{"21 user ids", map[string]any{"body": "x", "user_ids": ids}, "too_many_user_ids", "user_ids"},
		{"users with 21 tokens", map[string]any{"body": "x", "user_ids": []int{50}}, "too_many_tokens", "user_ids"},
		{"user id 0", map[string]any{"body": "x", "user_ids": []int{0}}, "invalid_value", "user_ids"},
		{"a token with a space", map[string]any{"body": "x", "tokens": []string{"ok token"}}, "invalid_value", "tokens"},
		{"empty message", map[string]any{"tokens": tok}, "empty_message", ""},
		{"reserved data key", map[string]any{"body": "x", "data": map[string]string{"from": "me"}, "tokens": tok}, "reserved_data_key", "data.from"},
		{"template variable", map[string]any{"body": "hi {{.name}}", "tokens": tok}, "template_error", "body"},
		{"an audience", map[string]any{"body": "x", "tokens": tok, "audience": map[string]any{"all": true}}, "not_applicable", "audience"},
		{"dry_run", map[string]any{"body": "x", "tokens": tok, "dry_run": true}, "not_applicable", "dry_run"},
		{"send_at", map[string]any{"body": "x", "tokens": tok, "send_at": "2030-01-01T00:00:00Z"}, "not_applicable", "send_at"},
		{"an unknown field", map[string]any{"body": "x", "tokens": tok, "token": "y"}, "unknown_field", "token"},
		{"tokens of the wrong type", map[string]any{"body": "x", "tokens": "ok-1"}, "invalid_type", "tokens"},
		{"a title of the wrong type", map[string]any{"title": 3, "tokens": tok}, "invalid_type", "title"},
	}
	for _, tc := range cases {
		var e teststack.ErrorBody
		resp := s.Do("POST", "/push/test", tc.body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != tc.code || e.Error.Field != tc.field || e.Error.Message == "" {
			t.Errorf("%s: %d %+v; want 400 %s naming %q", tc.name, resp.StatusCode, e.Error, tc.code, tc.field)
		}
	}
	var e teststack.ErrorBody
	if resp := s.DoAuth("POST", "/push/test", viewerToken, map[string]any{"body": "x", "tokens": tok}, &e); resp.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden" {
		t.Errorf("viewer: %d %+v; want 403 forbidden", resp.StatusCode, e.Error)
	}
	if st := s.Emu.Stats(); st.Requests != 0 {
		t.Fatalf("the emulator got %d requests from refused test sends", st.Requests)
	}
}

// Test sends are limited per token like submits: each sends real pushes.
func TestTestSendIsRateLimited(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.HTTP.TestSendsPerMinute = 1 }})
	body := map[string]any{"body": "x", "tokens": []string{"ok-limited-token-0001"}}
	if resp := s.Do("POST", "/push/test", body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first test send: %d", resp.StatusCode)
	}
	var e teststack.ErrorBody
	resp := s.Do("POST", "/push/test", body, &e)
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second test send: %d %+v, Retry-After %q; want 429 rate_limited", resp.StatusCode, e.Error, resp.Header.Get("Retry-After"))
	}
	if c := s.Emu.Counts("ok-limited-token-0001"); c.Attempts != 1 {
		t.Fatalf("the emulator saw %d requests, want the first send's one", c.Attempts)
	}
}
