package teststack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"pushfan/server/openapi"
)

// Contract is the API's OpenAPI document, loaded and validated, with a
// router that finds the operation of a request.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
}

// LoadContract loads the embedded document and checks it is valid OpenAPI.
func LoadContract(ctx context.Context) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document())
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	// The document has no servers, so the router matches the path alone:
	// every instance of a stack listens on its own loopback port.
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing the OpenAPI document: %w", err)
	}
	return &Contract{Doc: doc, router: r}, nil
}

// options are strict: a status the document does not list is a mismatch,
// and schema errors are reported without dumping the whole schema.
func (c *Contract) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		SkipSettingDefaults:     true,
		AuthenticationFunc:      bearerPresent,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
}

// bearerPresent checks what the document can know of authentication: the
// request carries a bearer token, or (scheme consoleSession) the session
// cookie. Whether the server accepts it is the server's business (the
// document lists the 401 and 403 it answers).
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	req := in.RequestValidationInput.Request
	if in.SecuritySchemeName == "consoleSession" {
		if ck, err := req.Cookie("pushfan_session"); err != nil || ck.Value == "" {
			return errors.New("no session cookie")
		}
		return nil
	}
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// Check validates one exchange. It returns "" when it conforms, or what
// does not, naming the route. The rules:
//   - A response must match the document for its operation and status,
//     error answers included.
//   - A request the document calls invalid must be refused with a 4xx:
//     tests send malformed requests on purpose (bad JSON, unknown fields,
//     no token) to check the 400s and 401s, and the document saying they
//     are invalid is the point. If the server accepts one (2xx), server and
//     document disagree about what is valid, which is a mismatch.
//   - A request to a path or method the document does not have may only
//     be refused, with the error body.
func (c *Contract) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) string {
	ctx := context.Background()
	route := req.Method + " " + req.URL.RequestURI()
	// A copy with its own body: validation reads it.
	vreq := req.Clone(ctx)
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	op, params, err := c.router.FindRoute(vreq)
	if err != nil {
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			if msg := c.checkErrorBody(resp, respBody); msg != "" {
				return fmt.Sprintf("%s (not in the document) → %d: %s", route, resp.StatusCode, msg)
			}
			return ""
		}
		return fmt.Sprintf("%s is not in the document (%v), yet the server answered %d", route, err, resp.StatusCode)
	}
	opts := c.options()
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: op, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr != nil && resp.StatusCode < 400 {
		return fmt.Sprintf("%s (operation %s): the document says the request is invalid, but the server answered %d: %v",
			route, op.Operation.OperationID, resp.StatusCode, reqErr)
	}
	if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" || ct == "application/x-ndjson" {
		// An event stream (or a stream of JSON lines) has no schema the
		// validator can decode: its status and headers are checked, its
		// events by the test.
		respOpts := *opts
		respOpts.ExcludeResponseBody = true
		opts = &respOpts
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Sprintf("%s (operation %s) → %d: the response does not match the document: %v\nbody: %s",
			route, op.Operation.OperationID, resp.StatusCode, err, clip(respBody))
	}
	return ""
}

// checkErrorBody validates an answer to an undocumented route against the
// Error schema.
func (c *Contract) checkErrorBody(resp *http.Response, body []byte) string {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "Content-Type " + ct + ", want application/json"
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("the body is not JSON: %v", err)
	}
	ref := c.Doc.Components.Schemas["Error"]
	if ref == nil || ref.Value == nil {
		return "the document has no Error schema"
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.DisableSchemaErrorDetails()); err != nil {
		return fmt.Sprintf("the body is not an Error: %v\nbody: %s", err, clip(body))
	}
	return ""
}

func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// contractTransport validates every exchange that goes through it and
// fails the test on a mismatch. It is the stack's HTTP client's transport,
// so every request a test makes through the stack is checked.
type contractTransport struct {
	t        testing.TB
	contract *Contract
	next     http.RoundTripper
}

func (ct *contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the request body to validate it: %w", err)
		}
		reqBody = b
		// A RoundTripper must not change the caller's request: send a copy.
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }
	}
	resp, err := ct.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the response of %s %s to validate it: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if msg := ct.contract.Check(req, reqBody, resp, respBody); msg != "" {
		// Errorf, not Fatalf: tests send from their own goroutines too.
		ct.t.Errorf("OpenAPI contract (server/openapi/openapi.json): %s", msg)
	}
	return resp, nil
}

// newContractClient returns an HTTP client whose every exchange is
// validated against the API's document (Options.NoContract: none).
func newContractClient(t testing.TB, off bool) *http.Client {
	t.Helper()
	if off {
		return &http.Client{}
	}
	c, err := LoadContract(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &contractTransport{t: t, contract: c, next: http.DefaultTransport}}
}
