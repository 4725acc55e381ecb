package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hookSink is the app's webhook receiver: it answers 503 while down and
// records every event it took, by webhook-id.
type hookSink struct {
	down atomic.Bool
	mu   sync.Mutex
	got  map[string]int // webhook-id → deliveries taken
}

func (s *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	s.got[r.Header.Get("webhook-id")]++
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *hookSink) taken(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[id]
}

// The Webhooks page shows each endpoint's health and deliveries as the
// API has them: failing with its waiting events while the receiver is
// down, healthy once they are delivered; a sender redelivers one (the
// same webhook-id reaches the receiver again) and enables a disabled
// endpoint. A broadcast's page lists that broadcast's deliveries. A
// viewer sees it all without the buttons.
func TestConsoleShowsWebhooks(t *testing.T) {
	sink := &hookSink{got: map[string]int{}}
	sink.down.Store(true)
	recv := httptest.NewServer(sink)
	t.Cleanup(recv.Close)
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	cfg := fmt.Sprintf("webhooks:\n  - name: app\n    url: %s/hooks\n    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", recv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// 40 users, every 20th token dead: two tokens invalidated.
	e := newEnv(t, 40, "PUSHFAN_CONFIG="+cfgPath, "PUSHFAN_WEBHOOK_ALLOW_PRIVATE=true")
	var b broadcast
	if code := e.api("POST", "/push/broadcast", map[string]any{"title": "Hi", "body": "b", "audience": map[string]any{"all": true}}, &b); code != http.StatusOK || b.Status != "completed" {
		t.Fatalf("broadcast: %d %+v", code, b)
	}
	// started, finished and tokens.invalidated (one per checkpoint that
	// found a dead token), all written with the broadcast's state: the
	// outbox is the truth the page must show.
	var events int
	if err := e.db.Get(&events, "SELECT COUNT(*) FROM webhook_outbox WHERE endpoint = 'app' AND broadcast_id = ?", b.ID); err != nil || events < 3 {
		t.Fatalf("outbox holds %d events of the broadcast (%v), want at least 3", events, err)
	}
	e.signIn(senderToken)
	e.route("#/webhooks")
	e.page("webhooks")
	row := `document.querySelector('#webhooks-table tr[data-endpoint="app"]')`
	e.waitFor(fmt.Sprintf("app failing with its %d events waiting", events), 30*time.Second,
		fmt.Sprintf(`%s?.querySelector('td.queued').dataset.value === '%d' && %s.querySelector('.health').dataset.health === 'failing'`, row, events, row))
	var list struct {
		Webhooks []struct {
			Queued   int `json:"queued"`
			Failures int `json:"consecutive_failures"`
		}
	}
	if code := e.api("GET", "/push/webhooks", nil, &list); code != http.StatusOK || len(list.Webhooks) != 1 || list.Webhooks[0].Queued != events || list.Webhooks[0].Failures < 1 {
		t.Fatalf("GET /push/webhooks: %d %+v; want app with %d queued and failures", code, list, events)
	}
	shown := eval[int](e, "reading the failures shown", "Number("+row+`.children[4].dataset.value)`)
	if shown < 1 {
		t.Fatalf("failures shown %d, want at least 1 (the API says %d)", shown, list.Webhooks[0].Failures)
	}

	e.click(`#webhooks-table tr[data-endpoint="app"] a`)
	e.page("webhooks")
	e.waitFor("every delivery pending, last answer 503", 20*time.Second, fmt.Sprintf(
		`document.querySelectorAll('#deliveries-table tbody tr[data-status="pending"]').length === %d &&
		[...document.querySelectorAll('#deliveries-table tbody tr')].every((tr) => tr.querySelector('.last-answer').textContent.includes('503'))`, events))
	types := eval[[]string](e, "reading the event types", `[...new Set([...document.querySelectorAll('#deliveries-table tbody tr')].map((tr) => tr.dataset.type))].sort()`)
	if fmt.Sprint(types) != "[broadcast.finished broadcast.started tokens.invalidated]" {
		t.Fatalf("deliveries shown %v", types)
	}

	// The receiver is back: the retries (about 5 s) deliver them all.
	sink.down.Store(false)
	e.waitFor("every event delivered", 60*time.Second, fmt.Sprintf(
		`document.querySelectorAll('#deliveries-table tbody tr[data-status="delivered"]').length === %d && `, events)+
		row+`.querySelector('td.queued').dataset.value === '0' && `+row+`.querySelector('.health').dataset.health === 'healthy'`)
	finished := `document.querySelector('#deliveries-table tr[data-type="broadcast.finished"]')`
	hookID := eval[string](e, "reading the finished event's webhook-id", finished+`.querySelector('.webhook-id').textContent`)
	attempts := eval[string](e, "reading its attempts", finished+`.querySelector('.attempts').textContent`)
	if sink.taken(hookID) != 1 {
		t.Fatalf("receiver took %s %d times before the redelivery, want 1", hookID, sink.taken(hookID))
	}
	e.click(`#deliveries-table tr[data-type="broadcast.finished"] button.redeliver`)
	deadline := time.Now().Add(30 * time.Second)
	for sink.taken(hookID) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the redelivered %s reached the receiver %d times within 30 s, want 2", hookID, sink.taken(hookID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitFor("the redelivery shown delivered, one more attempt", 20*time.Second,
		fmt.Sprintf(`%s?.dataset.status === 'delivered' && %s.querySelector('.attempts').textContent !== %q`, finished, finished, attempts))
	e.shot("deliveries")

	// The broadcast's page: its deliveries, to endpoint app.
	e.route(fmt.Sprintf("#/broadcasts/%d", b.ID))
	e.page("watch")
	e.waitFor("the broadcast's deliveries", 20*time.Second, fmt.Sprintf(
		`!document.querySelector('#broadcast-webhooks').hidden && document.querySelectorAll('#broadcast-deliveries tbody tr[data-status="delivered"]').length === %d`, events))
	if got := eval[string](e, "reading the finished row's webhook-id", `document.querySelector('#broadcast-deliveries tr[data-type="broadcast.finished"] .webhook-id').textContent`); got != hookID {
		t.Fatalf("the broadcast page shows webhook-id %s for broadcast.finished, the endpoint's page %s", got, hookID)
	}

	// Disabled (as after a day of failures), then enabled from the page.
	if _, err := e.db.Exec(`INSERT INTO webhook_endpoints (name, disabled_at, reason) VALUES ('app', UTC_TIMESTAMP(6), 'failing for 24 h')
		ON DUPLICATE KEY UPDATE disabled_at = VALUES(disabled_at), reason = VALUES(reason)`); err != nil {
		t.Fatal(err)
	}
	e.route("#/webhooks")
	e.page("webhooks")
	e.waitFor("app shown disabled with its reason", 20*time.Second,
		row+`?.querySelector('.health').dataset.health === 'disabled' && `+row+`.textContent.includes('failing for 24 h')`)
	e.click(`#webhooks-table tr[data-endpoint="app"] button.enable`)
	e.waitFor("app healthy again", 20*time.Second, row+`.querySelector('.health').dataset.health === 'healthy'`)
	var disabled int
	if err := e.db.Get(&disabled, "SELECT COUNT(*) FROM webhook_endpoints WHERE name = 'app' AND disabled_at IS NOT NULL"); err != nil || disabled != 0 {
		t.Fatalf("app still disabled in the database (%d, %v)", disabled, err)
	}
	e.shot("")

	// A viewer: the same tables, no buttons.
	e.click("#signout")
	e.page("signin")
	e.signIn(viewerToken)
	e.route("#/webhooks/app")
	e.page("webhooks")
	e.waitFor("the deliveries for a viewer", 20*time.Second, fmt.Sprintf(`document.querySelectorAll('#deliveries-table tbody tr[data-delivery]').length === %d`, events))
	if n := eval[int](e, "counting buttons", `document.querySelectorAll('#app button.redeliver, #app button.enable').length`); n != 0 {
		t.Fatalf("a viewer sees %d redeliver/enable buttons, want none", n)
	}
}
