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
	"pushfan/outcomes"
	"pushfan/server/apierror"
	"pushfan/server/deliveries"
)

// serve runs one request through the route, answering errors as the
// server's one handler does (status, code, field).
func serve(t *testing.T, r *deliveries.Routes, target string) (int, map[string]any) {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if ae, ok := err.(*apierror.Error); ok {
			_ = c.JSON(ae.Status, map[string]any{"error": map[string]any{"code": ae.Code, "field": ae.Field, "message": ae.Message}})
			return
		}
		_ = c.JSON(http.StatusInternalServerError, map[string]any{"error": err.Error()})
	}
	r.Register(e.Group("/push"))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %v: %s", target, err, rec.Body.String())
	}
	return rec.Code, body
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
	} {
		code, body := serve(t, r, tc.target)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusBadRequest || e["code"] != tc.code || e["field"] != tc.field {
			t.Fatalf("%s: %d %v, want 400 %s naming %s", tc.target, code, body, tc.code, tc.field)
		}
	}
}
