package server_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// Both FCM clients (PUSHFAN_FCM_CLIENT) go through the whole stack.
func TestBroadcastAllEndToEnd(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"direct", "sdk"} {
		t.Run(client, func(t *testing.T) {
			s := teststack.New(t, teststack.Options{CaptureLogs: true, Configure: func(c *config.Config) { c.FCMClient = client }})
			pop := s.SeedPopulation(3000)
			eligible := pop.Eligible()

			var b teststack.Broadcast
			resp := s.Do("POST", "/push/broadcast", map[string]any{
				"title": "Hello", "body": "World", "data": map[string]string{"k": "v"},
				"audience": map[string]any{"all": true},
			}, &b)
			switch resp.StatusCode {
			case http.StatusOK:
			case http.StatusAccepted:
				// Past PUSHFAN_WAIT_TIMEOUT (a loaded machine under the
				// race detector): the answer is the running broadcast, and
				// the counts are checked once it is done.
				b = s.WaitFinished(b.ID, 3*time.Minute)
			default:
				t.Fatalf("status %d, body %+v", resp.StatusCode, b)
			}

			// What the emulator actually received, token by token.
			wantErrors := map[string]int64{}
			var accepted int64
			for _, tk := range pop.Tokens {
				got := s.Emu.Counts(tk.Token)
				switch {
				case !tk.Eligible:
					if got.Attempts != 0 {
						t.Fatalf("ineligible token %s received %d requests", tk.Token, got.Attempts)
					}
				case tk.Dead != "":
					if got.Attempts != 1 || got.Accepted != 0 {
						t.Fatalf("dead token %s: %+v, want exactly one attempt and no delivery", tk.Token, got)
					}
					wantErrors[tk.Dead]++
				default:
					if got.Attempts != 1 || got.Accepted != 1 {
						t.Fatalf("token %s: %+v, want exactly one delivery", tk.Token, got)
					}
					accepted++
				}
			}
			if st := s.Emu.Stats(); st.Accepted != accepted {
				t.Fatalf("emulator accepted %d in total, per-token sum %d", st.Accepted, accepted)
			}
			dead := wantErrors["UNREGISTERED"] + wantErrors["INVALID_ARGUMENT"]
			if wantErrors["UNREGISTERED"] == 0 || wantErrors["INVALID_ARGUMENT"] == 0 {
				t.Fatal("population has no dead tokens of both kinds; the test would prove nothing")
			}
			if b.Status != "completed" || b.Targeted != int64(len(eligible)) || b.Succeeded != accepted ||
				b.Failed != dead || b.Canceled != 0 || b.InvalidatedTokens != dead {
				t.Fatalf("broadcast %+v; want targeted %d succeeded %d failed %d", b, len(eligible), accepted, dead)
			}
			if !reflect.DeepEqual(b.Errors, wantErrors) {
				t.Fatalf("errors %v, want %v", b.Errors, wantErrors)
			}
			if b.StartedAt == nil || b.FinishedAt == nil || b.DurationMS == nil {
				t.Fatalf("timestamps missing: %+v", b)
			}

			// The stored broadcast matches the response.
			var stored teststack.Broadcast
			s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &stored)
			if !reflect.DeepEqual(stored, b) {
				t.Fatalf("stored %+v\nresponse %+v", stored, b)
			}

			// Dead tokens are invalidated in MySQL.
			var invalidated int64
			if err := s.SQL.Get(&invalidated, "SELECT COUNT(*) FROM device_tokens WHERE invalid_reason IN ('UNREGISTERED','INVALID_ARGUMENT')"); err != nil {
				t.Fatal(err)
			}
			if invalidated != dead {
				t.Fatalf("%d tokens invalidated in MySQL, want %d", invalidated, dead)
			}

			// A second broadcast skips them and adds up in the stats.
			var b2 teststack.Broadcast
			s.Do("POST", "/push/broadcast", map[string]any{"title": "Again", "audience": map[string]any{"all": true}}, &b2)
			if b2.Targeted != int64(len(eligible))-dead || b2.Failed != 0 || b2.Succeeded != b2.Targeted {
				t.Fatalf("second broadcast %+v; want %d targeted, no failures", b2, int64(len(eligible))-dead)
			}
			var stats struct {
				Broadcasts, Targeted, Succeeded, Failed int64
				Errors                                  map[string]int64
			}
			s.Do("GET", "/push/stats", nil, &stats)
			if stats.Broadcasts != 2 || stats.Targeted != b.Targeted+b2.Targeted || stats.Succeeded != b.Succeeded+b2.Succeeded ||
				stats.Failed != b.Failed || !reflect.DeepEqual(stats.Errors, wantErrors) {
				t.Fatalf("stats %+v", stats)
			}

			// Worker log lines carry the request id and never a whole token.
			logs := s.LogText()
			if !strings.Contains(logs, `"msg":"send failed"`) {
				t.Fatal("no worker log line captured")
			}
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, `"msg":"send failed"`) && !strings.Contains(line, `"request_id"`) {
					t.Fatalf("worker log line without request id: %s", line)
				}
				if strings.Contains(line, "unregistered-37\"") {
					t.Fatalf("a whole token was logged: %s", line)
				}
			}
		})
	}
}

func TestBroadcastUserIDsSendsOnlyToThoseUsers(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	pop := s.SeedPopulation(300)
	chosen := map[uint64]bool{5: true, 20: true, 37: true, 41: true, 82: true, 9999: true} // 20 disabled, 9999 unknown
	ids := make([]uint64, 0, len(chosen))
	for id := range chosen {
		ids = append(ids, id)
	}
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"body": "hi", "audience": map[string]any{"user_ids": ids}}, &b)
	var want, dead int64
	for _, tk := range pop.Tokens {
		got := s.Emu.Counts(tk.Token).Attempts
		if chosen[tk.UserID] && tk.Eligible {
			want++
			if tk.Dead != "" {
				dead++
			}
			if got != 1 {
				t.Fatalf("token %s of chosen user got %d requests", tk.Token, got)
			}
		} else if got != 0 {
			t.Fatalf("token %s of user %d outside the audience got %d requests", tk.Token, tk.UserID, got)
		}
	}
	if want == 0 || b.Status != "completed" || b.Targeted != want || b.Succeeded != want-dead || b.Failed != dead {
		t.Fatalf("broadcast %+v, want targeted %d", b, want)
	}
}

func TestBroadcastRejectsBadInput(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	tooMany := make([]int, s.Config.Engine.MaxUserIDs+1)
	for i := range tooMany {
		tooMany[i] = i + 1
	}
	big := strings.Repeat("x", 4100)
	cases := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
		field  string
	}{
		{"malformed json", teststack.AdminToken, `{"title": "x",`, 400, "malformed_json", ""},
		{"not json", teststack.AdminToken, `hello`, 400, "malformed_json", ""},
		{"empty body", teststack.AdminToken, ``, 400, "empty_body", ""},
		{"trailing data", teststack.AdminToken, `{"title":"x","audience":{"all":true}} {}`, 400, "malformed_json", ""},
		{"unknown field", teststack.AdminToken, `{"title":"x","audiense":{"all":true}}`, 400, "unknown_field", "audiense"},
		{"wrong type", teststack.AdminToken, `{"title":5,"audience":{"all":true}}`, 400, "invalid_type", "title"},
		{"data value not string", teststack.AdminToken, `{"title":"x","data":{"n":1},"audience":{"all":true}}`, 400, "invalid_type", "data"},
		{"negative user id", teststack.AdminToken, `{"title":"x","audience":{"user_ids":[-1]}}`, 400, "invalid_type", "audience.user_ids"},
		{"empty message", teststack.AdminToken, map[string]any{"audience": map[string]any{"all": true}}, 400, "empty_message", ""},
		{"reserved data key", teststack.AdminToken, map[string]any{"title": "x", "data": map[string]string{"google.foo": "1"}, "audience": map[string]any{"all": true}}, 400, "reserved_data_key", "data.google.foo"},
		{"reserved from", teststack.AdminToken, map[string]any{"title": "x", "data": map[string]string{"from": "1"}, "audience": map[string]any{"all": true}}, 400, "reserved_data_key", "data.from"},
		{"oversized payload", teststack.AdminToken, map[string]any{"title": "x", "body": big, "audience": map[string]any{"all": true}}, 400, "payload_too_large", ""},
		{"missing audience", teststack.AdminToken, map[string]any{"title": "x"}, 400, "missing_field", "audience"},
		{"empty audience", teststack.AdminToken, map[string]any{"title": "x", "audience": map[string]any{"user_ids": []int{}}}, 400, "empty_audience", "audience"},
		{"all false", teststack.AdminToken, map[string]any{"title": "x", "audience": map[string]any{"all": false}}, 400, "empty_audience", "audience"},
		{"both audiences", teststack.AdminToken, map[string]any{"title": "x", "audience": map[string]any{"all": true, "user_ids": []int{1}}}, 400, "invalid_value", "audience"},
		{"too many user_ids", teststack.AdminToken, map[string]any{"title": "x", "audience": map[string]any{"user_ids": tooMany}}, 400, "too_many_user_ids", "audience.user_ids"},
		{"unknown class", teststack.AdminToken, map[string]any{"title": "x", "class": "high", "audience": map[string]any{"all": true}}, 400, "invalid_value", "class"},
		{"max_rate not a number", teststack.AdminToken, `{"title":"x","max_rate":"fast","audience":{"all":true}}`, 400, "invalid_type", "max_rate"},
		{"max_rate over the budget", teststack.AdminToken, map[string]any{"title": "x", "max_rate": 1e9, "audience": map[string]any{"all": true}}, 400, "max_rate_over_budget", "max_rate"},
		{"deliver_over not a duration", teststack.AdminToken, map[string]any{"title": "x", "deliver_over": "an hour", "audience": map[string]any{"all": true}}, 400, "invalid_value", "deliver_over"},
		{"deliver_over a number", teststack.AdminToken, `{"title":"x","deliver_over":3600,"audience":{"all":true}}`, 400, "invalid_type", "deliver_over"},
		{"paced transactional", teststack.AdminToken, map[string]any{"title": "x", "class": "transactional", "max_rate": 10, "audience": map[string]any{"user_ids": []int{1}}}, 400, "invalid_value", "class"},
		{"bad image", teststack.AdminToken, map[string]any{"title": "x", "image": "ftp://x", "audience": map[string]any{"all": true}}, 400, "invalid_value", "image"},
		{"missing token", "", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, 401, "unauthorized", ""},
		{"wrong token", "not-the-admin-token-at-all", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, 401, "unauthorized", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e teststack.ErrorBody
			resp := s.DoAuth("POST", "/push/broadcast", tc.token, tc.body, &e)
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Field != tc.field || e.Error.Message == "" {
				t.Fatalf("got %d %+v; want %d %s field %q", resp.StatusCode, e.Error, tc.status, tc.code, tc.field)
			}
		})
	}
	// Nothing was stored or sent by any of them.
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM broadcasts"); err != nil || n != 0 {
		t.Fatalf("%d broadcasts stored by bad requests (err %v)", n, err)
	}
}

func TestReadOnlyRoutes(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	for _, path := range []string{"/push/broadcasts/1", "/push/stats", "/push/broadcasts/1/failures"} {
		var e teststack.ErrorBody
		if resp := s.DoAuth("GET", path, "", nil, &e); resp.StatusCode != 401 || e.Error.Code != "unauthorized" {
			t.Fatalf("GET %s without token: %d %+v", path, resp.StatusCode, e)
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("GET", "/push/broadcasts/424242", nil, &e); resp.StatusCode != 404 || e.Error.Code != "not_found" {
		t.Fatalf("unknown id: %d %+v", resp.StatusCode, e)
	}
	if resp := s.Do("GET", "/push/broadcasts/abc", nil, &e); resp.StatusCode != 400 || e.Error.Code != "invalid_id" {
		t.Fatalf("bad id: %d %+v", resp.StatusCode, e)
	}
	if resp := s.DoAuth("GET", "/healthz", "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if resp := s.DoAuth("GET", "/readyz", "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("readyz %d", resp.StatusCode)
	}
	if resp := s.DoAuth("GET", "/nope", "", nil, &e); resp.StatusCode != 404 || e.Error.Code != "route_not_found" {
		t.Fatalf("unknown route: %d %+v", resp.StatusCode, e)
	}
	big := `{"title":"` + strings.Repeat("x", int(s.Config.HTTP.BodyLimit)) + `","audience":{"all":true}}`
	if resp := s.Do("POST", "/push/broadcast", big, &e); resp.StatusCode != 413 || e.Error.Code != "body_too_large" {
		t.Fatalf("oversized body: %d %+v", resp.StatusCode, e)
	}
}
