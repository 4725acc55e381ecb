package teststack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestContractCheck shows the contract check refuses what it must, without
// a stack: each case is one request and the answer a server might give.
func TestContractCheck(t *testing.T) {
	c, err := LoadContract(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const broadcast = `{"id":1,"status":"completed","app":"default","dry_run":false,"targeted":2,"users_targeted":1,"users_count_error":null,"planning":false,"succeeded":2,"failed":0,"canceled":0,"capped":0,"frequency_cap":null,` +
		`"errors":{},"invalidated_tokens":0,"writeback_failures":0,"category":null,"consent":null,"excluded_no_consent":0,"night_deferred":0,"analytics_label":null,"error":null,"message":{"title":"x"},"audience":{"all":true},"trigger":"api",` +
		`"created_at":"2026-01-01T00:00:00Z","planned_at":"2026-01-01T00:00:00Z","started_at":"2026-01-01T00:00:00.5Z","finished_at":"2026-01-01T00:00:01Z",` +
		`"duration_ms":500,"class":"bulk","max_rate":null,"deliver_over":null}`
	const badRequest = `{"error":{"code":"unknown_field","message":"unknown field \"nope\"","field":"nope"}}`
	for _, tc := range []struct {
		name           string
		method, path   string
		token, body    string
		status         int
		header         http.Header
		respBody       string
		wantInMismatch string // "" when the exchange conforms
	}{
		{name: "probe", method: "GET", path: "/healthz", status: 200, respBody: `{"status":"ok"}`},
		{name: "broadcast", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","audience":{"all":true}}`, status: 200, respBody: broadcast},
		{name: "a field missing from the answer", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(broadcast, `"class":"bulk",`, "", 1), wantInMismatch: `property "class" is missing`},
		{name: "an undocumented field in the answer", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(broadcast, `"class":"bulk"`, `"class":"bulk","extra":1`, 1), wantInMismatch: "extra"},
		{name: "targeted null while the audience is counted", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(strings.Replace(broadcast, `"targeted":2,"users_targeted":1,"users_count_error":null,"planning":false`, `"targeted":null,"users_targeted":null,"users_count_error":null,"planning":true`, 1), `"completed"`, `"running"`, 1)},
		{name: "a broadcast without planning", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(broadcast, `"planning":false,`, "", 1), wantInMismatch: `property "planning" is missing`},
		{name: "a status outside the enum", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(broadcast, `"completed"`, `"done"`, 1), wantInMismatch: "status"},
		{name: "an unknown field refused", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","nope":1,"audience":{"all":true}}`, status: 400, respBody: badRequest},
		{name: "an unknown field accepted", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","nope":1,"audience":{"all":true}}`, status: 200,
			respBody: broadcast, wantInMismatch: "the document says the request is invalid"},
		{name: "no token refused", method: "GET", path: "/push/stats", status: 401, header: http.Header{"Www-Authenticate": {`Bearer realm="pushfan-admin"`}},
			respBody: `{"error":{"code":"unauthorized","message":"send Authorization: Bearer <token>"}}`},
		{name: "401 without WWW-Authenticate", method: "GET", path: "/push/stats", status: 401,
			respBody: `{"error":{"code":"unauthorized","message":"m"}}`, wantInMismatch: "WWW-Authenticate"},
		{name: "429 without Retry-After", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","audience":{"all":true}}`, status: 429,
			respBody: `{"error":{"code":"rate_limited","message":"m"}}`, wantInMismatch: "Retry-After"},
		{name: "an undocumented status", method: "GET", path: "/push/stats", token: "t", status: 418, respBody: `{"error":{"code":"teapot","message":"m"}}`, wantInMismatch: "status is not supported"},
		{name: "an error body of the wrong shape", method: "GET", path: "/push/broadcasts/9", token: "t", status: 404, respBody: `{"error":"not found"}`, wantInMismatch: "/push/broadcasts/9"},
		{name: "a broadcast without its app", method: "GET", path: "/push/broadcasts/1", token: "t", status: 200,
			respBody: strings.Replace(broadcast, `"app":"default",`, "", 1), wantInMismatch: `property "app" is missing`},
		{name: "a broadcast request naming its app", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","app":"partner","audience":{"all":true}}`,
			status: 200, respBody: strings.Replace(broadcast, `"default"`, `"partner"`, 1)},
		{name: "an app name outside the pattern accepted", method: "POST", path: "/push/broadcast", token: "t", body: `{"title":"x","app":"Partner!","audience":{"all":true}}`,
			status: 200, respBody: broadcast, wantInMismatch: "the document says the request is invalid"},
		{name: "a list filtered by app", method: "GET", path: "/push/broadcasts?app=partner", token: "t", status: 200, respBody: `{"broadcasts":[` + broadcast + `],"next_cursor":null}`},
		{name: "an app outside the token's refused", method: "GET", path: "/push/stats?app=partner", token: "t", status: 403,
			respBody: `{"error":{"code":"forbidden_app","message":"m","field":"app"}}`},
		{name: "the apps", method: "GET", path: "/push/apps", token: "t", status: 200,
			respBody: `{"apps":[{"name":"consumer","project_id":"acme-consumer","rate_limit":9900}]}`},
		{name: "an app without its project", method: "GET", path: "/push/apps", token: "t", status: 200,
			respBody: `{"apps":[{"name":"consumer","rate_limit":9900}]}`, wantInMismatch: `property "project_id" is missing`},
		{name: "an undocumented route refused", method: "GET", path: "/nope", status: 404, respBody: `{"error":{"code":"route_not_found","message":"no such route: GET /nope"}}`},
		{name: "an undocumented route answered", method: "GET", path: "/nope", status: 200, respBody: `{}`, wantInMismatch: "is not in the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, "http://127.0.0.1"+tc.path, body)
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			h := http.Header{"Content-Type": {"application/json"}}
			for k, v := range tc.header {
				h[k] = v
			}
			resp := &http.Response{StatusCode: tc.status, Header: h}
			got := c.Check(req, []byte(tc.body), resp, []byte(tc.respBody))
			switch {
			case tc.wantInMismatch == "" && got != "":
				t.Fatalf("a conforming exchange was refused: %s", got)
			case tc.wantInMismatch != "" && !strings.Contains(got, tc.wantInMismatch):
				t.Fatalf("mismatch %q does not say %q", got, tc.wantInMismatch)
			case tc.wantInMismatch != "" && !strings.Contains(got, tc.method+" "+tc.path):
				t.Fatalf("mismatch %q does not name the route", got)
			}
		})
	}
}
