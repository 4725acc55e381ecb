package webhook_test

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/testsupport/testdb"
	"pushfan/webhook"
)

// seedDelivered writes n delivered events of endpoint app, one a second
// back from an hour ago, with the sequence engine.
func seedDelivered(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO webhook_outbox (msg_id, endpoint, type, body, status, attempts, created_at, next_at, last_status, delivered_at)
		SELECT CONCAT('msg_seed_', seq), 'app', 'broadcast.finished', '{}', 'delivered', 1,
			UTC_TIMESTAMP(6) - INTERVAL 3600 + seq SECOND, UTC_TIMESTAMP(6) - INTERVAL 3600 + seq SECOND, 204, UTC_TIMESTAMP(6) - INTERVAL 3600 + seq SECOND
		FROM seq_1_to_` + strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
}

// GET /push/webhooks reads each endpoint's row and its waiting events,
// never the outbox's delivered events: on 300,000 of them and 30 waiting,
// the health reads about as many outbox rows as are waiting, and says
// the last success, the queue and the oldest waiting event's failures.
func TestHealthReadsOnlyTheWaitingEvents(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	e.add("broadcast.finished", map[string]any{"id": 1})
	waitFor(t, "the delivery", 10*time.Second, func() bool { s, _, _ := e.row(); return s == "delivered" })
	var delivered time.Time
	if err := e.db.QueryRow("SELECT delivered_at FROM webhook_outbox").Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	const old, waiting = 300_000, 30
	seedDelivered(t, e.db, old)
	// Waiting events, not due for an hour: the oldest has failed 3 times.
	if _, err := e.db.Exec(`INSERT INTO webhook_outbox (msg_id, endpoint, type, body, attempts, next_at)
		SELECT CONCAT('msg_wait_', seq), 'app', 'broadcast.finished', '{}', IF(seq = 1, 3, 1), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR FROM seq_1_to_30`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec("ANALYZE TABLE webhook_outbox"); err != nil {
		t.Fatal(err)
	}
	rr := testdb.NewRowsRead(t, sqlx.NewDb(e.db, "mysql"))
	var hs []webhook.Health
	var err error
	read := rr.During(func() { hs, err = e.d.Status(context.Background()) }, "webhook_outbox", "webhook_endpoints")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].LastSuccess == nil || !hs[0].LastSuccess.Equal(delivered.UTC()) || hs[0].Queued != waiting || hs[0].Failing != 3 {
		t.Fatalf("health %+v; want the last success at %v, %d queued, the oldest failed 3 times", hs, delivered, waiting)
	}
	// The waiting events' range of the index (and the boundary read that
	// ends it), and the oldest one by its id.
	if n := read["webhook_outbox"]; n > waiting+2 {
		t.Fatalf("the health read %d outbox rows of %d (%d waiting); want the waiting ones only", n, old+waiting+1, waiting)
	}
	t.Logf("rows read: %v", read)
}

// After the upgrade that keeps the last success on the endpoint's row,
// the row has none: the first deliverer to start reads it from the
// outbox's delivered events, once.
func TestTheLastSuccessIsReadFromTheOutboxAfterTheUpgrade(t *testing.T) {
	o := newOutbox(t, "http://127.0.0.1:9/hooks")
	seedDelivered(t, o.db, 1000)
	var newest time.Time
	if err := o.db.QueryRow("SELECT MAX(delivered_at) FROM webhook_outbox").Scan(&newest); err != nil {
		t.Fatal(err)
	}
	d := o.deliverer(time.Second, time.Second, nil)
	var hs []webhook.Health
	waitFor(t, "the last success read from the outbox", 10*time.Second, func() bool {
		var err error
		hs, err = d.Status(context.Background())
		return err == nil && len(hs) == 1 && hs[0].LastSuccess != nil
	})
	if !hs[0].LastSuccess.Equal(newest) {
		t.Fatalf("last success %v, want the newest delivery's %v", hs[0].LastSuccess, newest)
	}
}
