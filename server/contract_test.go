package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/broadcast/rules"
	"pushfan/model"
	"pushfan/server"
)

// The contract tests run the API against fakes of the domain: what the
// handlers, the auth and the one error handler make of the domain's
// answers, in milliseconds and without a database. The end-to-end tests
// (the other files) run the same routes on the real stack.

const (
	contractSender   = "contract-sender-token-0123456789"
	contractViewer   = "contract-viewer-token-0123456789"
	contractPartner  = "contract-partner-token-0123456789"
	contractApprover = "contract-approver-token-0123456789"
	contractAdmin    = "contract-admin-token-0123456789"
)

// fakeDomain answers as the domain would. A method it does not define is
// its embedded interface's, nil: a test that reaches one panics, which the
// server turns into a 500 that fails the test's status check.
type fakeDomain struct {
	server.Submitter
	server.Reader

	validate  func(rules.Spec) (broadcast.Request, error)
	submitted []broadcast.Request
	stored    map[uint64]*model.Broadcast
	existing  bool // Submit answers an idempotent replay
}

func (f *fakeDomain) Validate(spec rules.Spec) (broadcast.Request, error) {
	if f.validate != nil {
		return f.validate(spec)
	}
	return broadcast.Request{Submission: model.Submission{App: "consumer", Message: model.Message{Title: spec.Title}}}, nil
}

// Submit stores the request as broadcast 7, queued.
func (f *fakeDomain) Submit(_ context.Context, req broadcast.Request) (*model.Broadcast, bool, error) {
	f.submitted = append(f.submitted, req)
	b := &model.Broadcast{
		Submission: model.Submission{
			App:       req.App,
			Message:   req.Message,
			CreatedBy: req.CreatedBy,
			Trigger:   "api",
			Class:     model.ClassBulk,
		},
		ID:        7,
		Status:    model.StatusQueued,
		CreatedAt: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	f.stored[b.ID] = b
	return b, f.existing, nil
}

func (f *fakeDomain) Get(_ context.Context, id uint64) (*model.Broadcast, error) {
	if b, ok := f.stored[id]; ok {
		return b, nil
	}
	return nil, broadcast.ErrNotFound
}

func (f *fakeDomain) Peek(ctx context.Context, id uint64) (*model.Broadcast, error) {
	return f.Get(ctx, id)
}

func (f *fakeDomain) ExpectedFinish(*model.Broadcast) *time.Time { return nil }

func (f *fakeDomain) Engagement(context.Context, *model.Broadcast) (model.Engagement, []string, error) {
	return model.Engagement{}, nil, nil
}

// contractServer is a Server over f: a sender, a viewer, and a sender
// limited to app partner; two apps. adjust may add to the domain (its
// consents, its categories).
func contractServer(t *testing.T, f *fakeDomain, adjust ...func(*server.Domain)) http.Handler {
	t.Helper()
	if f.stored == nil {
		f.stored = map[uint64]*model.Broadcast{}
	}
	token := func(name string, role model.Role, secret string, apps ...string) server.Token {
		return server.Token{Name: name, Role: role, Hash: sha256.Sum256([]byte(secret)), Apps: apps}
	}
	cfg := server.Config{
		Tokens: server.Tokens{Admin: []server.Token{
			token("ci", server.RoleSender, contractSender), token("dash", server.RoleViewer, contractViewer), token("partner-ci", server.RoleSender, contractPartner, "partner"),
			token("rev", server.RoleApprover, contractApprover), token("ops", server.RoleAdmin, contractAdmin),
		}},
		Timeouts: server.Timeouts{Wait: time.Second, DB: time.Second},
		Limits:   server.Limits{Body: 1 << 20, SubmitsPerMinute: 600, TestSendsPerMinute: 60, PreviewsPerMinute: 600, SignInFailuresPerMinute: 60},
	}
	d := server.Domain{Submitter: f, Reader: f,
		Apps: server.Apps{List: []server.App{{Name: "consumer", ProjectID: "consumer-prod"}, {Name: "partner", ProjectID: "partner-prod"}}}}
	for _, a := range adjust {
		a(&d)
	}
	return server.New(cfg, d, nil, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler()
}

// call serves one request and decodes its JSON answer.
func call(t *testing.T, h http.Handler, method, path, token, body string, header ...string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, path, rec.Code, rec.Body.String())
	}
	return rec, out
}

// wantError checks an answer is the contract's error object.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, out map[string]any, status int, code, field string) {
	t.Helper()
	e, _ := out["error"].(map[string]any)
	if rec.Code != status || e["code"] != code || (field != "" && e["field"] != field) || e["message"] == "" {
		t.Fatalf("got %d %v; want %d with code %s, field %q", rec.Code, out, status, code, field)
	}
}

// A request rule's refusal is a 400 naming the field, and nothing is
// submitted; so is a field the request may not have, before the rules.
func TestContractValidationErrorNamesTheField(t *testing.T) {
	t.Parallel()
	f := &fakeDomain{validate: func(rules.Spec) (broadcast.Request, error) {
		return broadcast.Request{}, &rules.FieldError{Code: "invalid_value", Field: "message.title", Message: "title is empty"}
	}}
	h := contractServer(t, f)
	rec, out := call(t, h, http.MethodPost, "/push/broadcast", contractSender, `{"title": "", "audience": {"all": true}}`)
	wantError(t, rec, out, http.StatusBadRequest, "invalid_value", "message.title")
	rec, out = call(t, h, http.MethodPost, "/push/broadcast", contractSender, `{"title": "hi", "audience": {"all": true}, "colour": "red"}`)
	wantError(t, rec, out, http.StatusBadRequest, "unknown_field", "colour")
	rec, out = call(t, h, http.MethodPost, "/push/broadcast", contractSender, `{"title": 5}`)
	wantError(t, rec, out, http.StatusBadRequest, "invalid_type", "title")
	if len(f.submitted) != 0 {
		t.Fatalf("submitted %d broadcasts; want none", len(f.submitted))
	}
}

// A submit without wait answers 202: the broadcast object as stored, a
// Location to poll, and the caller and the idempotency key passed on; a
// replay of the key says so.
func TestContractSubmitAnswers202(t *testing.T) {
	t.Parallel()
	f := &fakeDomain{}
	h := contractServer(t, f)
	rec, out := call(t, h, http.MethodPost, "/push/broadcast?wait=0", contractSender, `{"title": "Hello", "audience": {"all": true}}`, "Idempotency-Key", "order-42")
	if rec.Code != http.StatusAccepted || rec.Header().Get("Location") != "/push/broadcasts/7" || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("got %d, Location %q, replayed %q: %v", rec.Code, rec.Header().Get("Location"), rec.Header().Get("Idempotent-Replayed"), out)
	}
	if out["id"] != 7.0 || out["status"] != "queued" || out["planning"] != false || out["app"] != "consumer" || out["created_by"] != "ci" {
		t.Fatalf("broadcast object: %v", out)
	}
	if msg, _ := out["message"].(map[string]any); msg["title"] != "Hello" {
		t.Fatalf("message: %v", out["message"])
	}
	if len(f.submitted) != 1 || f.submitted[0].CreatedBy != "ci" || f.submitted[0].IdempotencyKey != "order-42" || f.submitted[0].RequestID == "" {
		t.Fatalf("submitted %+v", f.submitted)
	}
	f.existing = true
	rec, _ = call(t, h, http.MethodPost, "/push/broadcast?wait=0", contractSender, `{"title": "Hello", "audience": {"all": true}}`, "Idempotency-Key", "order-42")
	if rec.Code != http.StatusAccepted || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d, Idempotent-Replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
}

// A broadcast the domain does not have is a 404; an id that is not one,
// a 400 naming it.
func TestContractUnknownBroadcastIs404(t *testing.T) {
	t.Parallel()
	h := contractServer(t, &fakeDomain{})
	rec, out := call(t, h, http.MethodGet, "/push/broadcasts/42", contractSender, "")
	wantError(t, rec, out, http.StatusNotFound, "not_found", "")
	if msg := out["error"].(map[string]any)["message"]; msg != "no broadcast with id 42" {
		t.Fatalf("message %q", msg)
	}
	rec, out = call(t, h, http.MethodGet, "/push/broadcasts/abc", contractSender, "")
	wantError(t, rec, out, http.StatusBadRequest, "invalid_id", "id")
}

// Who may do what is the API's own: no token is a 401, a viewer's change
// a 403, and a token limited to an app may not send for another.
func TestContractTokens(t *testing.T) {
	t.Parallel()
	f := &fakeDomain{}
	h := contractServer(t, f)
	rec, out := call(t, h, http.MethodPost, "/push/broadcast", "", `{"title": "Hello", "audience": {"all": true}}`)
	wantError(t, rec, out, http.StatusUnauthorized, "unauthorized", "")
	if rec.Header().Get("WWW-Authenticate") == "" {
		t.Error("a 401 without WWW-Authenticate")
	}
	rec, out = call(t, h, http.MethodPost, "/push/broadcast", contractViewer, `{"title": "Hello", "audience": {"all": true}}`)
	wantError(t, rec, out, http.StatusForbidden, "forbidden", "")
	rec, out = call(t, h, http.MethodPost, "/push/broadcast", contractPartner, `{"app": "consumer", "title": "Hello", "audience": {"all": true}}`)
	wantError(t, rec, out, http.StatusForbidden, "forbidden_app", "app")
	if len(f.submitted) != 0 {
		t.Fatalf("submitted %d broadcasts; want none", len(f.submitted))
	}
	// The apps a token sees are the ones it may use.
	rec, out = call(t, h, http.MethodGet, "/push/apps", contractPartner, "")
	if apps, _ := out["apps"].([]any); rec.Code != http.StatusOK || len(apps) != 1 || apps[0].(map[string]any)["name"] != "partner" {
		t.Fatalf("GET /push/apps as partner-ci: %d %v", rec.Code, out)
	}
}

// A field of the wrong JSON type is named with the type it wants in the
// request's words, never a Go type name (the request's types moved
// between packages once and leaked "[]rules.VariantSpec").
func TestContractAWrongTypeSaysWhatItWantsInPlainWords(t *testing.T) {
	t.Parallel()
	h := contractServer(t, &fakeDomain{})
	for body, want := range map[string]string{
		`{"title": "a", "audience": {"all": true}, "variants": {"a": 1}}`: "an array of objects",
		`{"title": "a", "audience": {"user_ids": "x"}}`:                   "an array of positive integers",
		`{"title": "a", "audience": 5}`:                                   "an object",
	} {
		rec, out := call(t, h, http.MethodPost, "/push/broadcast", contractSender, body)
		wantError(t, rec, out, http.StatusBadRequest, "invalid_type", "")
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, want) || strings.Contains(msg, "rules.") || strings.Contains(msg, "broadcast.") {
			t.Errorf("%s: message %q; want it to say %q in plain words", body, msg, want)
		}
	}
}
