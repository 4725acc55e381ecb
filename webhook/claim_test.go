package webhook_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/webhook"
)

// counter is an endpoint that answers after delay and counts the attempts
// of each webhook-id.
type counter struct {
	delay time.Duration
	mu    sync.Mutex
	ids   map[string]int
	n     atomic.Int64 // attempts arrived
}

func newCounter(delay time.Duration) *counter { return &counter{delay: delay, ids: map[string]int{}} }

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.mu.Lock()
	c.ids[r.Header.Get("webhook-id")]++
	c.mu.Unlock()
	time.Sleep(c.delay) // a slow endpoint
	w.WriteHeader(http.StatusNoContent)
}

// counts returns how many ids arrived, and how many of them more than once.
func (c *counter) counts() (ids, twice int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.ids {
		if n > 1 {
			twice++
		}
	}
	return len(c.ids), twice
}

// outbox is a test database with one endpoint, app at url, and its
// outbox writer: deliverers are started on it as instances would be.
type outbox struct {
	t   *testing.T
	db  *sql.DB
	eps []*webhook.Endpoint
	out *webhook.Outbox
}

func newOutbox(t *testing.T, url string) *outbox {
	tdb := testdb.New(t)
	eps, err := webhook.Compile([]webhook.Config{{Name: "app", URL: url, Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	return &outbox{t: t, db: tdb.SQL.DB, eps: eps, out: webhook.NewOutbox(eps)}
}

// add writes n events, each in a transaction of its own.
func (o *outbox) add(n int) {
	o.t.Helper()
	for i := range n {
		tx, err := o.db.Begin()
		if err != nil {
			o.t.Fatal(err)
		}
		if err := o.out.Add(context.Background(), tx, webhook.BroadcastFinished, 7, map[string]any{"n": i}); err != nil {
			o.t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			o.t.Fatal(err)
		}
	}
}

// deliverer is an instance's deliverer: attempts within timeout, claims
// that outlast it by margin; set is applied before it starts.
func (o *outbox) deliverer(timeout, margin time.Duration, set func(*webhook.Deliverer)) *webhook.Deliverer {
	d := webhook.NewDeliverer(o.db, o.eps, webhook.NewClient(timeout, true), timeout, 50*time.Millisecond, defaultRetry(), slog.New(slog.DiscardHandler))
	d.SetLeaseMargin(margin)
	if set != nil {
		set(d)
	}
	d.Start(context.Background())
	o.t.Cleanup(func() { _ = d.Stop(context.Background()) })
	return d
}

func (o *outbox) count(where string) int {
	o.t.Helper()
	var n int
	if err := o.db.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE " + where).Scan(&n); err != nil {
		o.t.Fatal(err)
	}
	return n
}

func stop(t *testing.T, d *webhook.Deliverer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		t.Fatalf("stopping a deliverer: %v", err)
	}
}

// Two instances and an endpoint that takes 300 ms an answer: 100 events
// at 4 at a time take 7.5 s from one instance, well past a claim of the
// timeout and the margin (3 s here; 30 s and more in production, against
// minutes of a slow endpoint). Claimed one attempt at a time, each event
// reaches the endpoint exactly once, and each is charged one attempt.
func TestTwoInstancesDeliverASlowEndpointsEventsOnce(t *testing.T) {
	t.Parallel()
	rc := newCounter(300 * time.Millisecond)
	srv := httptest.NewServer(rc)
	defer srv.Close()
	o := newOutbox(t, srv.URL)
	o.add(100) // all due before either instance looks
	a := o.deliverer(time.Second, 2*time.Second, nil)
	b := o.deliverer(time.Second, 2*time.Second, nil)
	waitFor(t, "the 100 events delivered", 60*time.Second, func() bool { return o.count("status = 'delivered'") == 100 })
	stop(t, a)
	stop(t, b) // no attempt in flight when the endpoint's counts are read
	ids, twice := rc.counts()
	if ids != 100 || twice != 0 || rc.n.Load() != 100 {
		t.Fatalf("the endpoint got %d attempts of %d webhook-ids, %d of them more than once; want each of 100 once", rc.n.Load(), ids, twice)
	}
	if n := o.count("attempts = 1 AND claim_token IS NULL"); n != 100 {
		t.Fatalf("%d of 100 rows record one attempt and no claim", n)
	}
}

// An attempt whose claim another instance took over (its lease ran out:
// here the row is made due by hand, as a stalled instance would find it)
// fails late, after that instance delivered the event: the late failure
// changes nothing, and is counted. Recorded unconditionally, it would
// put the delivered event back in the queue, to be sent a third time.
func TestALateResultOfALostClaimChangesNothing(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 { // instance A's attempt: held, then a failure
			close(arrived)
			<-release
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	o := newOutbox(t, srv.URL)
	var lost atomic.Int64
	a := o.deliverer(5*time.Second, 30*time.Second, func(d *webhook.Deliverer) { d.OnLostClaim = func(string) { lost.Add(1) } })
	o.add(1)
	a.Wake()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("instance A's attempt did not arrive within 10 s")
	}
	// A's lease runs out while its attempt hangs; B takes the row over and
	// delivers it.
	if _, err := o.db.Exec("UPDATE webhook_outbox SET next_at = UTC_TIMESTAMP(6)"); err != nil {
		t.Fatal(err)
	}
	o.deliverer(5*time.Second, 30*time.Second, nil)
	waitFor(t, "instance B's delivery", 10*time.Second, func() bool { return o.count("status = 'delivered'") == 1 })
	close(release)
	stop(t, a) // A's attempt ends (500) and is recorded, or dropped
	if got := o.count("status = 'delivered' AND attempts = 1 AND last_status = 204 AND last_error IS NULL"); got != 1 {
		var st string
		var att int
		_ = o.db.QueryRow("SELECT status, attempts FROM webhook_outbox").Scan(&st, &att)
		t.Fatalf("after A's late failure the row is %s with %d attempts; want delivered by B, one attempt", st, att)
	}
	if lost.Load() != 1 || n.Load() != 2 {
		t.Fatalf("%d lost claims counted, %d attempts at the endpoint; want 1 and 2", lost.Load(), n.Load())
	}
}

// Stop in the middle of the work: the attempts in flight finish under
// their own timeout and are recorded once; the events not started are
// charged nothing and are due at once, and another instance delivers them
// without waiting out a lease or a backoff.
func TestStopChargesNothingItDidNotStart(t *testing.T) {
	rc := newCounter(time.Second)
	srv := httptest.NewServer(rc)
	defer srv.Close()
	o := newOutbox(t, srv.URL)
	o.add(20)
	a := o.deliverer(5*time.Second, 30*time.Second, nil)
	waitFor(t, "4 attempts in flight", 10*time.Second, func() bool { return rc.n.Load() == 4 })
	stop(t, a)
	if got := rc.n.Load(); got != 4 {
		t.Fatalf("%d attempts reached the endpoint, want the 4 in flight at Stop", got)
	}
	if n := o.count("status = 'delivered' AND attempts = 1"); n != 4 {
		t.Fatalf("%d events delivered with one attempt, want the 4 in flight at Stop", n)
	}
	if n := o.count("status = 'pending' AND attempts = 0 AND last_error IS NULL AND claim_token IS NULL AND next_at <= UTC_TIMESTAMP(6)"); n != 16 {
		t.Fatalf("%d of the 16 events not started are waiting uncharged and due now", n)
	}
	start := time.Now()
	b := o.deliverer(5*time.Second, 30*time.Second, nil)
	waitFor(t, "the other instance to deliver the rest", 20*time.Second, func() bool { return o.count("status = 'delivered'") == 20 })
	stop(t, b)
	// 16 at 4 at a time of 1 s: about 4 s, against a backoff of 4 s or
	// more (5 s -20 %) and a lease of 35 s had they been charged or held.
	ids, twice := rc.counts()
	if ids != 20 || twice != 0 || o.count("attempts = 1") != 20 {
		t.Fatalf("%d webhook-ids at the endpoint, %d twice, %d rows of one attempt; want 20, none, 20", ids, twice, o.count("attempts = 1"))
	}
	t.Logf("the other instance delivered the 16 in %v", time.Since(start).Round(time.Millisecond))
}
