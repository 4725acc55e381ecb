package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/webhook"
)

// The receiver's side, written from the Standard Webhooks spec rather than
// from package webhook: the signature is "v1," + base64(HMAC-SHA256(key,
// id + "." + timestamp + "." + body)), the key the base64 after whsec_.
func verify(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", h.Get("webhook-id"), h.Get("webhook-timestamp"), body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver records what it got; answer decides each answer in turn.
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	got    []delivery
	answer func(n int) int
}

type delivery struct {
	id   string
	body []byte
	ok   bool      // the signature verified
	at   time.Time // when it arrived
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, delivery{id: r.Header.Get("webhook-id"), body: body, ok: verify(rc.secret, r.Header, body), at: time.Now()})
	n := len(rc.got)
	rc.mu.Unlock()
	code := http.StatusNoContent
	if rc.answer != nil {
		code = rc.answer(n)
	}
	w.WriteHeader(code)
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

type env struct {
	t   *testing.T
	db  *sql.DB
	out *webhook.Outbox
	d   *webhook.Deliverer
}

// defaultRetry is PUSHFAN_WEBHOOK_RETRY_SCHEDULE's default, which the
// timings of these tests ("about 5 s and 30 s later") assume.
func defaultRetry() []time.Duration {
	return []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
}

func newEnv(t *testing.T, url string, allowPrivate bool, events ...string) *env {
	return newEnvRetry(t, url, allowPrivate, defaultRetry(), events...)
}

// newEnvRetry is newEnv with the deliverer retrying on retry.
func newEnvRetry(t *testing.T, url string, allowPrivate bool, retry []time.Duration, events ...string) *env {
	tdb := testdb.New(t)
	eps, err := webhook.Compile([]webhook.Config{{Name: "app", URL: url, Secret: secret, Events: events}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	e := &env{t: t, db: tdb.SQL.DB, out: webhook.NewOutbox(eps),
		d: webhook.NewDeliverer(tdb.SQL.DB, eps, webhook.NewClient(5*time.Second, allowPrivate), 5*time.Second, 50*time.Millisecond, retry, log)}
	e.d.Start(context.Background())
	t.Cleanup(func() { _ = e.d.Stop(context.Background()) })
	return e
}

// add writes an event in a transaction of its own, as the state owner does
// beside its change.
func (e *env) add(typ string, data any) {
	e.t.Helper()
	tx, err := e.db.Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.out.Add(context.Background(), tx, typ, 7, data); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	e.d.Wake()
}

func (e *env) row() (status string, attempts int, lastError sql.NullString) {
	e.t.Helper()
	if err := e.db.QueryRow("SELECT status, attempts, last_error FROM webhook_outbox").Scan(&status, &attempts, &lastError); err != nil {
		e.t.Fatal(err)
	}
	return
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One event: delivered once, signed, in the Standard Webhooks envelope.
func TestAnEventIsDeliveredOnceSigned(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	e.add(webhook.BroadcastFinished, map[string]any{"id": 7, "status": "completed"})
	waitFor(t, "the delivery", 10*time.Second, func() bool { s, _, _ := e.row(); return s == "delivered" })
	got := rc.deliveries()
	if len(got) != 1 || !got[0].ok || !strings.HasPrefix(got[0].id, "msg_") {
		t.Fatalf("deliveries %+v, want one, signed, with a msg_ id", got)
	}
	var env struct {
		Type      string
		Timestamp time.Time
		Data      map[string]any
	}
	if err := json.Unmarshal(got[0].body, &env); err != nil || env.Type != webhook.BroadcastFinished || env.Data["status"] != "completed" || env.Timestamp.IsZero() {
		t.Fatalf("body %s (%v)", got[0].body, err)
	}
	// The verifier can fail: another secret does not verify it.
	rc2 := &receiver{secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 24 bytes!"))}
	rc2.ServeHTTP(httptest.NewRecorder(), signedRequest(t, got[0]))
	if rc2.deliveries()[0].ok {
		t.Fatal("a wrong secret verified the signature")
	}
}

func signedRequest(t *testing.T, d delivery) *http.Request {
	eps, _ := webhook.Compile([]webhook.Config{{Name: "x", URL: "https://example.com", Secret: secret}})
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(d.body)))
	ts := time.Now().Unix()
	r.Header.Set("webhook-id", d.id)
	r.Header.Set("webhook-timestamp", fmt.Sprint(ts))
	r.Header.Set("webhook-signature", eps[0].Sign(d.id, ts, d.body))
	return r
}

// Two 500s, then delivered on the third attempt (about 5 s and 30 s
// later), with the same webhook-id every time.
func TestFailuresAreRetriedWithTheSameID(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the real retry schedule (35 s)")
	}
	t.Parallel()
	rc := &receiver{t: t, secret: secret, answer: func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	start := time.Now()
	e.add(webhook.BroadcastStarted, map[string]any{"id": 7})
	waitFor(t, "the third attempt to deliver", 60*time.Second, func() bool { s, _, _ := e.row(); return s == "delivered" })
	took := time.Since(start)
	got := rc.deliveries()
	if len(got) != 3 || got[0].id != got[1].id || got[1].id != got[2].id {
		t.Fatalf("deliveries %+v, want three with one id", got)
	}
	if _, n, _ := e.row(); n != 3 || took < 25*time.Second {
		t.Fatalf("%d attempts in %v, want 3 after the backoff (about 5 s and 30 s)", n, took)
	}
	t.Logf("delivered on the third attempt after %v", took.Round(time.Millisecond))
}

// A schedule of 1 s, 2 s: three 500s are retried about 1 s, 2 s and 2 s
// (the last step repeating) after each, ±20 %, and the fourth attempt
// delivers. The default's 5 s and 30 s would be far outside these bounds.
func TestFailuresAreRetriedOnTheSchedule(t *testing.T) {
	t.Parallel()
	rc := &receiver{t: t, secret: secret, answer: func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnvRetry(t, srv.URL, true, []time.Duration{time.Second, 2 * time.Second})
	e.add(webhook.BroadcastStarted, map[string]any{"id": 7})
	waitFor(t, "the fourth attempt to deliver", 20*time.Second, func() bool { s, _, _ := e.row(); return s == "delivered" })
	got := rc.deliveries()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4", len(got))
	}
	// Each gap is at least the step's -20 % (the attempt is not due
	// before), and at most its +20 % with room for the poll (50 ms), the
	// claim and the race detector.
	const slack = 500 * time.Millisecond
	for i, step := range []time.Duration{time.Second, 2 * time.Second, 2 * time.Second} {
		gap := got[i+1].at.Sub(got[i].at)
		if lo, hi := step*4/5, step*6/5+slack; gap < lo || gap > hi {
			t.Errorf("attempt %d came %v after attempt %d, want %v to %v (step %v ±20 %%)", i+2, gap, i+1, lo, hi, step)
		}
	}
}

// 410 Gone stops the retries.
func TestGoneStops(t *testing.T) {
	rc := &receiver{t: t, secret: secret, answer: func(int) int { return http.StatusGone }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	e.add(webhook.BroadcastHeld, map[string]any{"id": 7})
	waitFor(t, "the 410 to stop it", 10*time.Second, func() bool { s, _, _ := e.row(); return s == "gone" })
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.deliveries()); n != 1 {
		t.Fatalf("%d attempts after a 410, want 1", n)
	}
}

// With private addresses not allowed, an endpoint on loopback is refused
// at connect time, and the event stays pending with why.
func TestPrivateAddressesAreRefused(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, false)
	e.add(webhook.BroadcastFinished, map[string]any{"id": 7})
	waitFor(t, "the refused attempt", 10*time.Second, func() bool { _, n, _ := e.row(); return n >= 1 })
	s, _, why := e.row()
	if s != "pending" || !strings.Contains(why.String, "private") || len(rc.deliveries()) != 0 {
		t.Fatalf("status %s, error %q, %d delivered; want pending, refused as private, none", s, why.String, len(rc.deliveries()))
	}
}

// A redirect is not followed: it is a failed attempt.
func TestRedirectsAreNotFollowed(t *testing.T) {
	other := &receiver{t: t, secret: secret}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	srv := httptest.NewServer(http.RedirectHandler(otherSrv.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	e.add(webhook.BroadcastFinished, map[string]any{"id": 7})
	waitFor(t, "the attempt", 10*time.Second, func() bool { _, n, _ := e.row(); return n >= 1 })
	s, _, why := e.row()
	if s != "pending" || why.String != "answered 307" || len(other.deliveries()) != 0 {
		t.Fatalf("status %s, error %q, %d at the redirect's target; want pending, 307, none", s, why.String, len(other.deliveries()))
	}
}

// An endpoint gets only the events it asked for, and a batch of dead
// tokens splits at TokensPerEvent.
func TestEventsFollowTheSubscriptionAndSplit(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true, webhook.TokensInvalidated)
	e.add(webhook.BroadcastFinished, map[string]any{"id": 7}) // not wanted
	tx, _ := e.db.Begin()
	dead := make([]webhook.DeadToken, 2500)
	for i := range dead {
		dead[i] = webhook.DeadToken{TokenID: uint64(i + 1), UserID: uint64(i + 1), Code: "UNREGISTERED"}
	}
	if err := e.out.AddInvalidated(context.Background(), tx, 7, dead); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.d.Wake()
	waitFor(t, "three deliveries", 10*time.Second, func() bool { return len(rc.deliveries()) == 3 })
	seen := map[uint64]bool{}
	for _, d := range rc.deliveries() {
		var env struct {
			Type string
			Data struct {
				BroadcastID uint64 `json:"broadcast_id"`
				Tokens      []webhook.DeadToken
			}
		}
		if err := json.Unmarshal(d.body, &env); err != nil || env.Type != webhook.TokensInvalidated || env.Data.BroadcastID != 7 || len(env.Data.Tokens) > webhook.TokensPerEvent {
			t.Fatalf("body %s (%v)", d.body, err)
		}
		for _, tok := range env.Data.Tokens {
			seen[tok.TokenID] = true
		}
	}
	if len(seen) != 2500 {
		t.Fatalf("%d distinct tokens delivered, want 2500", len(seen))
	}
}

// The receiver down for 20 s (its port closed): every event is delivered
// once it is back, each once.
func TestAReceiverDownGetsEverythingWhenBack(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps the receiver down for 20 s")
	}
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused
	e := newEnv(t, "http://"+addr, true)
	for i := range 10 {
		e.add(webhook.BroadcastFinished, map[string]any{"id": i})
	}
	time.Sleep(20 * time.Second)
	rc := &receiver{t: t, secret: secret}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("reopening %s: %v", addr, err)
	}
	srv := &http.Server{Handler: rc}
	go srv.Serve(back) //nolint:errcheck // closed below
	defer srv.Close()
	waitFor(t, "the ten events after the receiver came back", 90*time.Second, func() bool {
		var n int
		_ = e.db.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE status = 'delivered'").Scan(&n)
		return n == 10
	})
	ids := map[string]bool{}
	for _, d := range rc.deliveries() {
		if ids[d.id] || !d.ok {
			t.Fatalf("webhook-id %s delivered twice, or badly signed", d.id)
		}
		ids[d.id] = true
	}
	if len(ids) != 10 {
		t.Fatalf("%d events delivered, want 10", len(ids))
	}
}

// An event that failed for a day expires and disables its endpoint: its
// other events wait, unexpired and unsent, until the endpoint is enabled
// again, and are then delivered.
func TestAnEndpointFailingForADayIsDisabled(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	rc := &receiver{t: t, secret: secret, answer: func(int) int {
		if fail.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, srv.URL, true)
	var disabled atomic.Value
	e.d.OnDisabled = func(name string) { disabled.Store(name) }
	e.add(webhook.BroadcastFinished, map[string]any{"id": 1})
	// It was written a day ago: its next failure is its last.
	if _, err := e.db.Exec("UPDATE webhook_outbox SET created_at = UTC_TIMESTAMP(6) - INTERVAL 25 HOUR"); err != nil {
		t.Fatal(err)
	}
	e.d.Wake()
	waitFor(t, "the old event to expire", 10*time.Second, func() bool {
		var n int
		_ = e.db.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE status = 'expired'").Scan(&n)
		return n == 1
	})
	if disabled.Load() != "app" {
		t.Fatalf("OnDisabled told %v, want app", disabled.Load())
	}
	hs, err := e.d.Status(context.Background())
	if err != nil || len(hs) != 1 || hs[0].Disabled == nil || hs[0].DisabledFor != "answered 500" {
		t.Fatalf("status %+v (%v), want app disabled for answering 500", hs, err)
	}
	// A new event waits while the endpoint is disabled.
	e.add(webhook.BroadcastFinished, map[string]any{"id": 2})
	attempts := len(rc.deliveries())
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.deliveries()); n != attempts {
		t.Fatalf("%d attempts on a disabled endpoint", n-attempts)
	}
	fail.Store(false)
	if err := e.d.Enable(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiting event once enabled", 10*time.Second, func() bool {
		var n int
		_ = e.db.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE status = 'delivered'").Scan(&n)
		return n == 1
	})
	if hs, _ := e.d.Status(context.Background()); hs[0].Disabled != nil {
		t.Fatalf("still disabled after Enable: %+v", hs[0])
	}
}
