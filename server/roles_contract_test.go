package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Each role may do what the roles below it may, and more (model.Role):
// a viewer reads and counts, a sender sends, an approver releases, an
// admin reloads and manages webhooks and API keys. A role below a route's gets 403
// forbidden naming the role needed; one at or above it gets past the
// check (the fake domain then answers whatever it answers: here only the
// check is under test).
func TestEachRouteNeedsItsRole(t *testing.T) {
	t.Parallel()
	h := contractServer(t, &fakeDomain{})
	tokens := map[string]string{"viewer": contractViewer, "sender": contractSender, "approver": contractApprover, "admin": contractAdmin}
	order := []string{"viewer", "sender", "approver", "admin"}
	for _, r := range []struct {
		method, path, body, need string
	}{
		{http.MethodGet, "/push/broadcasts", "", "viewer"},
		{http.MethodGet, "/push/campaigns", "", "viewer"},
		{http.MethodPost, "/push/preview", `{"audience":{"all":true}}`, "viewer"},
		{http.MethodPost, "/push/segments/preview", `{"filter":{"field":"platform","op":"eq","value":"ios"}}`, "viewer"},
		{http.MethodPost, "/push/audiences/any/preview", `{}`, "viewer"},
		{http.MethodPost, "/push/broadcast", `{"title":"t","audience":{"all":true}}`, "sender"},
		{http.MethodPost, "/push/broadcasts/1/cancel", ``, "sender"},
		{http.MethodPost, "/push/broadcasts/1/release", ``, "approver"},
		{http.MethodPatch, "/push/broadcasts/1", `{"title":"t"}`, "sender"},
		{http.MethodPost, "/push/cron/any/pause", ``, "admin"},
		{http.MethodPost, "/push/cron/any/resume", ``, "admin"},
		{http.MethodPost, "/push/cron/any/run", ``, "admin"},
		{http.MethodPost, "/push/audiences/reload", ``, "admin"},
		{http.MethodPost, "/push/webhooks/app/enable", ``, "admin"},
		{http.MethodPost, "/push/webhooks/app/deliveries/1/redeliver", ``, "admin"},
		{http.MethodGet, "/push/keys", ``, "admin"},
		{http.MethodPost, "/push/keys", `{"name":"cron","role":"sender"}`, "admin"},
		{http.MethodDelete, "/push/keys/key_0000000000000000", ``, "admin"},
		{http.MethodGet, "/push/templates", ``, "viewer"},
		{http.MethodPost, "/push/templates", `{"name":"sale","body":"b"}`, "sender"},
		{http.MethodPut, "/push/templates/sale", `{"body":"b"}`, "sender"},
		{http.MethodDelete, "/push/templates/sale", ``, "sender"},
	} {
		for i, role := range order {
			rec, out := call(t, h, r.method, r.path, tokens[role], r.body, "Content-Type", "application/json")
			refused := rec.Code == http.StatusForbidden && out["error"].(map[string]any)["code"] == "forbidden"
			below := i < slices.Index(order, r.need)
			if refused != below {
				t.Errorf("%s %s as %s: %d %v; want refused=%v (needs %s)", r.method, r.path, role, rec.Code, out, below, r.need)
			}
			if refused {
				wantError(t, rec, out, http.StatusForbidden, "forbidden", "")
				if msg, _ := out["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "needs "+r.need) {
					t.Errorf("%s %s as %s: %q does not name the role needed (%s)", r.method, r.path, role, msg, r.need)
				}
			}
		}
	}
}
