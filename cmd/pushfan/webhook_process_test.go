//go:build !race

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pushfan/fcmemu"
)

// hookSink counts the webhook-ids it got; while down it answers 503.
type hookSink struct {
	down atomic.Bool
	mu   sync.Mutex
	ids  map[string]int
	kind map[string]int
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if h.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.ids[r.Header.Get("webhook-id")]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookSink) count() (ids, twice int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.ids {
		if n > 1 {
			twice++
		}
	}
	return len(h.ids), twice
}

// webhookEnv is a procEnv whose processes send every event to a sink.
func webhookEnv(t *testing.T, n int) (*procEnv, *hookSink) {
	e := newProcEnv(t, n, fcmemu.Config{Latency: time.Millisecond})
	sink := &hookSink{ids: map[string]int{}, kind: map[string]int{}}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	cfg := filepath.Join(t.TempDir(), "pushfan.yaml")
	yaml := fmt.Sprintf("webhooks:\n  - name: app\n    url: %s\n    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", srv.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "PUSHFAN_CONFIG="+cfg, "PUSHFAN_WEBHOOK_ALLOW_PRIVATE=true")
	return e, sink
}

func (e *procEnv) outboxCount(where string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE " + where).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// kill -9 between a finish and its delivery: the event, written with the
// finish, is delivered by the instance that comes next.
func TestKill9BeforeAWebhookIsDelivered(t *testing.T) {
	e, sink := webhookEnv(t, 500)
	sink.down.Store(true)
	a := e.start("hook-a")
	b := e.waitFinished(a, e.submit(a).ID)
	if n := e.outboxCount(fmt.Sprintf("type = 'broadcast.finished' AND broadcast_id = %d AND status = 'pending'", b.ID)); n != 1 {
		t.Fatalf("%d pending broadcast.finished rows after the finish, want 1", n)
	}
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.WaitExit(t, "killed")
	sink.down.Store(false)
	c := e.start("hook-b")
	_ = c
	deadline := time.Now().Add(90 * time.Second)
	for e.outboxCount("status = 'pending'") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still pending 90 s after the restart", e.outboxCount("status = 'pending'"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	ids, twice := sink.count()
	if want := e.outboxCount("1 = 1"); ids != want || twice != 0 {
		t.Fatalf("%d webhook-ids received of %d written, %d twice", ids, want, twice)
	}
	t.Logf("after kill -9 and restart: %d events delivered, none twice", ids)
}

// Three instances deliver one outbox: in the normal case, no event twice.
func TestThreeInstancesDeliverEachEventOnce(t *testing.T) {
	e, sink := webhookEnv(t, 300)
	procs := []*proc{e.start("hook-1"), e.start("hook-2"), e.start("hook-3")}
	var ids []uint64
	for i := range 9 { // within a token's submit burst
		ids = append(ids, e.submit(procs[i%3]).ID)
	}
	for _, id := range ids {
		e.waitFinished(procs[0], id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for e.outboxCount("status = 'pending'") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still pending after a minute", e.outboxCount("status = 'pending'"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, twice := sink.count()
	if want := e.outboxCount("1 = 1"); got != want || twice != 0 || e.outboxCount("type = 'broadcast.finished'") != 9 {
		t.Fatalf("%d webhook-ids received of %d written (%d finished), %d twice", got, want, e.outboxCount("type = 'broadcast.finished'"), twice)
	}
	t.Logf("three instances: %d events delivered, none twice", got)
}
