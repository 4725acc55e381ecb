package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"pushfan/engagement"
	"pushfan/fcm"
	"pushfan/model"
	"pushfan/server/openapi"
	"pushfan/webhook"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	if err != nil {
		t.Fatalf("loading server/openapi/openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("server/openapi/openapi.json is not valid OpenAPI: %v", err)
	}
	return doc
}

// routeServer is a Server with every route registered (metrics included)
// and no dependencies behind them: enough to list and serve the routes that
// need none.
func routeServer(t *testing.T) *Server {
	t.Helper()
	cfg := Config{Tokens: Tokens{Admin: []Token{{Name: "admin-1", Role: RoleSender, Hash: sha256.Sum256([]byte("openapi-test-token-0123456789"))}},
		Internal: "openapi-internal-token-0123456789"}, Limits: Limits{Body: 1 << 20}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(cfg, Domain{}, nil, log, WithMetrics(http.NotFoundHandler()), WithEvents(engagement.NewIngester(nil, nil, log, time.Second)),
		WithWebhooks(webhook.NewDeliverer(nil, nil, nil, time.Second, time.Second, []time.Duration{time.Second}, log)))
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPIDocumentMatchesRoutes keeps the document and the router in
// step: every route Echo serves is an operation of the document, and every
// operation is a route, so neither can drift from the other.
func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	s := routeServer(t)
	var served []string
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // the groups' catch-alls, which only answer 404 or 401
		}
		path := strings.Replace(echoParam.ReplaceAllString(r.Path, "{$1}"), "/*", "/{path}", 1)
		served = append(served, r.Method+" "+path)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not in server/openapi/openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("operation %s is in server/openapi/openapi.json but no route serves it", r)
		}
	}
	if len(served) < 14 {
		t.Errorf("only %d routes listed (%v); the route listing is broken", len(served), served)
	}
}

// TestOpenAPIDocumentCoversErrors checks each operation lists the error
// answers the middleware gives it whatever the handler does: 500 always,
// 401 behind a token, 429 behind a bearer token, 403 for a viewer's write,
// 400 and 413 with a body.
func TestOpenAPIDocumentCoversErrors(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			want := []string{"500"}
			secured := op.Security == nil || len(*op.Security) > 0 // nil: the document's default, a token
			if secured {
				want = append(want, "401")
			}
			if secured && method != http.MethodGet && strings.HasPrefix(path, "/push/") {
				want = append(want, "403")
			}
			// A bearer token is charged to the address's failed
			// authentication budget, whose 429 any such route may answer.
			bearer := op.Security == nil
			if op.Security != nil {
				for _, req := range *op.Security {
					for scheme := range req {
						bearer = bearer || strings.HasSuffix(scheme, "Bearer")
					}
				}
			}
			if bearer {
				want = append(want, "429")
			}
			if op.RequestBody != nil {
				want = append(want, "400", "413")
			}
			for _, code := range want {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s does not document its %s answer", name, code)
				}
			}
			for code, r := range op.Responses.Map() {
				if code[0] != '2' && r.Ref != "" && !strings.HasPrefix(r.Ref, "#/components/responses/") {
					t.Errorf("%s %s: error answers reuse components/responses", name, code)
				}
			}
		}
	}
}

// TestOpenAPIEnumsMatchTheCode ties the document's enums to the values the
// code defines, so a new status or error code cannot go undocumented.
func TestOpenAPIEnumsMatchTheCode(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	enum := func(name string) []string {
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Fatalf("no schema %s", name)
		}
		var out []string
		for _, v := range ref.Value.Enum {
			out = append(out, v.(string))
		}
		sort.Strings(out)
		return out
	}
	sorted := func(v ...string) []string { sort.Strings(v); return v }
	statuses := []string{}
	for _, st := range []model.Status{model.StatusHeld, model.StatusScheduled, model.StatusPlanning, model.StatusQueued, model.StatusRunning, model.StatusCompleted, model.StatusCanceled, model.StatusFailed} {
		if !st.Valid() {
			t.Fatalf("status %s not valid", st)
		}
		statuses = append(statuses, string(st))
	}
	for _, c := range []struct {
		schema string
		want   []string
	}{
		{"Status", sorted(statuses...)},
		{"ErrorCode", sorted(fcm.KnownCodes()...)},
		{"Class", sorted(model.ClassTransactional, model.ClassBulk)},
	} {
		if got := enum(c.schema); !slices.Equal(got, c.want) {
			t.Errorf("schema %s enumerates %v; the code has %v", c.schema, got, c.want)
		}
	}
	for _, v := range enum("Status") {
		if !model.Status(v).Valid() {
			t.Errorf("the Status enum has %q, which model.Status does not accept", v)
		}
	}
}

// TestOpenAPIServed checks GET /openapi.json answers the embedded document
// without a token.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := routeServer(t)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), openapi.Document()) {
		t.Fatal("GET /openapi.json does not serve the embedded document")
	}
}
