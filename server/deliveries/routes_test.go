package deliveries_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/lease/outcome"
	"pushfan/outcomes"
	"pushfan/server/apierror"
	"pushfan/server/deliveries"
)

// serve runs one request through the routes.
func serve(t *testing.T, r *deliveries.Routes, target string) (int, map[string]any) {
	t.Helper()
	e := newEcho(r)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %v: %s", target, err, rec.Body.String())
	}
	return rec.Code, body
}

// newEcho serves r's routes, answering errors as the server's one
// handler does (status, code, field).
func newEcho(r *deliveries.Routes) *echo.Echo {
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if ae, ok := err.(*apierror.Error); ok {
			_ = c.JSON(ae.Status, map[string]any{"error": map[string]any{"code": ae.Code, "field": ae.Field, "message": ae.Message}})
			return
		}
		_ = c.JSON(http.StatusInternalServerError, map[string]any{"error": err.Error()})
	}
	r.Register(e.Group("/push"))
	return e
}

// The route answers the user's deliveries as package outcomes reads them,
// and every bad parameter is a 400 naming it.
func TestTheRouteAnswersAUsersDeliveriesAndNamesBadParameters(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.SQL.DB
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `INSERT INTO users (id) VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO device_tokens (id, user_id, token, platform) VALUES (3, 42, 'a', 'ios')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, category) VALUES ('{"title":"Hello"}', '{"all":true}', 'news')`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, []lease.Plan{{Lo: 0, Hi: 5, Targets: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s := lease.New(db, nil)
	c, err := s.Claim(ctx, lease.ClaimOptions{Owner: "t", Lease: time.Minute})
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	outs := []lease.TargetOutcome{{Cursor: 1, Kind: lease.OutcomeSucceeded}, {Cursor: 3, Kind: lease.OutcomeFailed, Code: "UNREGISTERED"}}
	if _, err := s.Checkpoint(ctx, c, lease.Checkpoint{Cursor: 5, End: lease.Done, Succeeded: 1, Failed: 1, Errors: map[string]int64{"UNREGISTERED": 1},
		Outcomes: func() []lease.TargetOutcome { return outs }}); err != nil {
		t.Fatal(err)
	}
	r := &deliveries.Routes{Domain: &outcomes.Reader{DB: db}}

	code, body := serve(t, r, "/push/users/42/deliveries")
	ds, _ := body["deliveries"].([]any)
	if code != http.StatusOK || len(ds) != 1 || body["next_after"] != nil {
		t.Fatalf("200 with one delivery, got %d %v", code, body)
	}
	d := ds[0].(map[string]any)
	dev := d["devices"].([]any)[0].(map[string]any)
	if d["title"] != "Hello" || d["category"] != "news" || dev["token_id"] != 3.0 || dev["platform"] != "ios" ||
		dev["outcome"] != "failed" || dev["code"] != "UNREGISTERED" || dev["opened_at"] != nil || dev["clicked_at"] != nil {
		t.Fatalf("delivery %v", d)
	}
	for _, tc := range []struct{ target, code, field string }{
		{"/push/users/x/deliveries", "invalid_id", "id"},
		{"/push/users/0/deliveries", "invalid_id", "id"},
		{"/push/users/42/deliveries?limit=0", "invalid_value", "limit"},
		{"/push/users/42/deliveries?limit=101", "invalid_value", "limit"},
		{"/push/users/42/deliveries?after=-1", "invalid_value", "after"},
		{"/push/broadcasts/x/outcomes", "invalid_id", "id"},
		{"/push/broadcasts/1/outcomes?outcome=delivered", "invalid_value", "outcome"},
		{"/push/broadcasts/1/outcomes?format=xml", "invalid_value", "format"},
	} {
		code, body := serve(t, r, tc.target)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusBadRequest || e["code"] != tc.code || e["field"] != tc.field {
			t.Fatalf("%s: %d %v, want 400 %s naming %s", tc.target, code, body, tc.code, tc.field)
		}
	}
}

// The export streams a line per kept target; an unknown broadcast is a
// 404 and a named audience's a 409.
func TestTheExportStreamsALinePerKeptTarget(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.SQL.DB
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `INSERT INTO users (id) VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO device_tokens (id, user_id, token) VALUES (1, 42, 'a'), (3, 42, 'b')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO broadcasts (id, message, audience) VALUES (7, '{}', '{"name":"vips"}')`); err != nil {
		t.Fatal(err)
	}
	rows := outcome.Encode(1, []outcome.Target{{Cursor: 1, Kind: outcome.Succeeded}, {Cursor: 3, Kind: outcome.Failed, Code: "UNREGISTERED"}})
	if _, err := db.ExecContext(ctx, `INSERT INTO broadcasts (id, message, audience) VALUES (8, '{}', '{"all":true}')`); err != nil {
		t.Fatal(err)
	}
	// Listed twice (a takeover): the sent listing wins, once.
	if _, err := db.ExecContext(ctx, `INSERT INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at)
		VALUES (8, 0, 1, 1, 0, 1, 3, 2, ?, UTC_TIMESTAMP(6)), (8, 0, 2, 1, 0, 3, 3, 1, ?, UTC_TIMESTAMP(6))`,
		rows, outcome.Encode(3, []outcome.Target{{Cursor: 3, Kind: outcome.Canceled}})); err != nil {
		t.Fatal(err)
	}
	r := &deliveries.Routes{Domain: &outcomes.Reader{DB: db}}
	e := newEcho(r)
	get := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/push/broadcasts/8/outcomes"); code != http.StatusOK ||
		body != `{"user_id":42,"token_id":1,"outcome":"accepted","code":""}`+"\n"+`{"user_id":42,"token_id":3,"outcome":"failed","code":"UNREGISTERED"}`+"\n" {
		t.Fatalf("ndjson: %d %q", code, body)
	}
	if code, body := get("/push/broadcasts/8/outcomes?format=csv&outcome=failed"); code != http.StatusOK || body != "user_id,token_id,outcome,code\n42,3,failed,UNREGISTERED\n" {
		t.Fatalf("csv: %d %q", code, body)
	}
	if code, _ := get("/push/broadcasts/9/outcomes"); code != http.StatusNotFound {
		t.Fatalf("an unknown broadcast: %d", code)
	}
	if code, _ := get("/push/broadcasts/7/outcomes"); code != http.StatusConflict {
		t.Fatalf("a named audience's: %d", code)
	}
}
