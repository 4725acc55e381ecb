package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is the app's endpoint: it checks every signature with the
// Standard Webhooks algorithm, written here from the spec.
type hookReceiver struct {
	mu     sync.Mutex
	events []hookEvent
	bad    int
}

type hookEvent struct {
	ID   string
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(hookSecret, "whsec_"))
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	h.mu.Lock()
	defer h.mu.Unlock()
	var ev hookEvent
	if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)) || json.Unmarshal(body, &ev) != nil {
		h.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ev.ID = r.Header.Get("webhook-id")
	h.events = append(h.events, ev)
	w.WriteHeader(http.StatusNoContent)
}

// badlySigned counts the deliveries whose signature did not verify.
func (h *hookReceiver) badlySigned() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bad
}

func (h *hookReceiver) of(typ string) []hookEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookEvent
	for _, e := range h.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func hookStack(t *testing.T) (*teststack.Stack, *hookReceiver) {
	rc := &hookReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.WebhookAllowPrivate = true // the receiver is on loopback
		c.Webhooks = []config.Webhook{{Name: "app", URL: srv.URL, Secret: hookSecret}}
	}})
	return s, rc
}

// A broadcast's events reach the app: started, finished (exactly once,
// its counts those of GET /push/broadcasts/{id}) and the dead tokens,
// exactly those the emulator refused (UNREGISTERED, INVALID_ARGUMENT about
// the token), with their codes.
func TestWebhooksTellTheAppWhatHappened(t *testing.T) {
	t.Parallel()
	s, rc := hookStack(t)
	pop := s.SeedPopulation(2000)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if b.Status != "completed" {
		t.Fatalf("broadcast %+v", b)
	}
	var deadWant []string
	for _, tok := range pop.Eligible() {
		if tok.Dead != "" { // UNREGISTERED, and INVALID_ARGUMENT about the token
			deadWant = append(deadWant, fmt.Sprint(tok.UserID)+" "+tok.Dead)
		}
	}
	waitUntil(t, "broadcast.finished and every dead token delivered", 30*time.Second, func() bool {
		n := 0
		for _, e := range rc.of("tokens.invalidated") {
			var d struct{ Tokens []struct{} }
			_ = json.Unmarshal(e.Data, &d)
			n += len(d.Tokens)
		}
		return len(rc.of("broadcast.finished")) > 0 && n >= len(deadWant)
	})
	time.Sleep(1500 * time.Millisecond) // a second delivery pass: nothing may come twice
	fin := rc.of("broadcast.finished")
	if len(fin) != 1 || len(rc.of("broadcast.started")) != 1 || rc.badlySigned() != 0 {
		t.Fatalf("%d broadcast.finished, %d broadcast.started, %d badly signed; want 1, 1, 0", len(fin), len(rc.of("broadcast.started")), rc.badlySigned())
	}
	var got, api struct {
		ID                                    uint64
		Status                                string
		Targeted, Succeeded, Failed, Canceled int64
		Errors                                map[string]int64
		InvalidatedTokens                     int64 `json:"invalidated_tokens"`
	}
	if err := json.Unmarshal(fin[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &api)
	if fmt.Sprint(got) != fmt.Sprint(api) || got.Status != "completed" {
		t.Fatalf("broadcast.finished carries %+v, the API says %+v", got, api)
	}
	var deadGot []string
	ids := map[string]bool{}
	for _, e := range rc.of("tokens.invalidated") {
		if ids[e.ID] {
			t.Fatalf("webhook-id %s delivered twice", e.ID)
		}
		ids[e.ID] = true
		var d struct {
			BroadcastID uint64 `json:"broadcast_id"`
			Tokens      []struct {
				UserID uint64 `json:"user_id"`
				Code   string
			}
		}
		if err := json.Unmarshal(e.Data, &d); err != nil || d.BroadcastID != b.ID {
			t.Fatalf("tokens.invalidated %s (%v)", e.Data, err)
		}
		for _, tok := range d.Tokens {
			deadGot = append(deadGot, fmt.Sprint(tok.UserID)+" "+tok.Code)
		}
	}
	slices.Sort(deadGot)
	slices.Sort(deadWant)
	if !slices.Equal(deadGot, deadWant) {
		t.Fatalf("tokens.invalidated listed users %v, the emulator refused %v", deadGot, deadWant)
	}
	t.Logf("%d dead tokens in %d tokens.invalidated events", len(deadGot), len(ids))
}

// A held broadcast is announced, and its cancel is its finish.
func TestWebhooksForAHeldBroadcast(t *testing.T) {
	t.Parallel()
	s, rc := hookStack(t)
	s.SeedTokens(1, tokens("held-", 5))
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "hold": true, "audience": map[string]any{"all": true}}, &b)
	if b.Status != "held" {
		t.Fatalf("broadcast %+v", b)
	}
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	waitUntil(t, "broadcast.held and broadcast.finished", 30*time.Second, func() bool {
		return len(rc.of("broadcast.held")) == 1 && len(rc.of("broadcast.finished")) == 1
	})
	var fin struct{ Status string }
	_ = json.Unmarshal(rc.of("broadcast.finished")[0].Data, &fin)
	if fin.Status != "canceled" || len(rc.of("broadcast.started")) != 0 {
		t.Fatalf("finished as %q, %d started events; want canceled, none", fin.Status, len(rc.of("broadcast.started")))
	}

	// The operator's view: the endpoint's health, the broadcast's
	// deliveries, and one sent again with its webhook-id.
	var hooks struct {
		Webhooks []struct {
			Name        string
			LastSuccess *time.Time `json:"last_success"`
			Failing     int        `json:"consecutive_failures"`
			Queued      int64
		}
	}
	var page struct {
		Deliveries []struct {
			ID        uint64
			WebhookID string `json:"webhook_id"`
			Type      string
			Status    string
			Attempts  int
		}
	}
	// The receiver has both events; the deliverer records each answer
	// once it has read it, so the outbox may lag the receiver briefly.
	delivered := func() bool {
		for _, d := range page.Deliveries {
			if d.Status != "delivered" {
				return false
			}
		}
		return len(page.Deliveries) == 2
	}
	waitUntil(t, "both deliveries recorded", 30*time.Second, func() bool {
		s.Do("GET", fmt.Sprintf("/push/webhooks/app/deliveries?broadcast_id=%d", b.ID), nil, &page)
		return delivered()
	})
	s.Do("GET", "/push/webhooks", nil, &hooks)
	if len(hooks.Webhooks) != 1 || hooks.Webhooks[0].Name != "app" || hooks.Webhooks[0].LastSuccess == nil || hooks.Webhooks[0].Queued != 0 || hooks.Webhooks[0].Failing != 0 {
		t.Fatalf("webhooks %+v", hooks)
	}
	if page.Deliveries[0].Type != "broadcast.finished" || page.Deliveries[0].Attempts != 1 {
		t.Fatalf("deliveries %+v", page)
	}
	if resp := s.Do("POST", fmt.Sprintf("/push/webhooks/app/deliveries/%d/redeliver", page.Deliveries[0].ID), nil, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("redeliver: %d", resp.StatusCode)
	}
	waitUntil(t, "the redelivery", 30*time.Second, func() bool { return len(rc.of("broadcast.finished")) == 2 })
	if got := rc.of("broadcast.finished"); got[1].ID != page.Deliveries[0].WebhookID {
		t.Fatalf("redelivered as %s, want the same webhook-id %s", got[1].ID, page.Deliveries[0].WebhookID)
	}
	if resp := s.Do("GET", "/push/webhooks/nope/deliveries", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown endpoint: %d", resp.StatusCode)
	}
}

// With no endpoint configured the list is empty (the console says so)
// and every endpoint's route answers 404 naming it.
func TestNoWebhooksConfigured(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	var hooks struct{ Webhooks []any }
	if resp := s.Do("GET", "/push/webhooks", nil, &hooks); resp.StatusCode != http.StatusOK || hooks.Webhooks == nil || len(hooks.Webhooks) != 0 {
		t.Fatalf("GET /push/webhooks: %d %+v; want 200 and an empty list", resp.StatusCode, hooks)
	}
	for _, r := range [][2]string{{"GET", "/push/webhooks/app/deliveries"}, {"POST", "/push/webhooks/app/deliveries/1/redeliver"}, {"POST", "/push/webhooks/app/enable"}} {
		var e struct {
			Error struct{ Code, Message string }
		}
		if resp := s.Do(r[0], r[1], nil, &e); resp.StatusCode != http.StatusNotFound || e.Error.Code != "not_found" || !strings.Contains(e.Error.Message, "app") {
			t.Fatalf("%s %s: %d %+v; want 404 not_found naming app", r[0], r[1], resp.StatusCode, e)
		}
	}
}

// broadcast.engagement goes out an hour and a day after a broadcast
// finished, once per stage however many instances look: each new instance
// runs a pass at start, over the same outbox. The counts are the API's.
func TestWebhooksSummarizeEngagement(t *testing.T) {
	t.Parallel()
	s, rc := hookStack(t)
	devices := tokens("sum-", 20)
	s.SeedTokens(1, devices)
	id, toks := sentTokens(t, s, devices, nil)
	var evs []event
	for _, tok := range toks[:7] {
		evs = append(evs, event{Token: tok, Type: "opened"})
	}
	if a := postEvents(t, s, evs); a.Accepted != 7 {
		t.Fatalf("events: %+v", a)
	}
	// An untracked broadcast has no summary.
	var quiet teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "q", "track": false, "audience": map[string]any{"all": true}}, &quiet)
	if quiet.Status != "completed" {
		t.Fatalf("untracked broadcast %+v", quiet)
	}

	type summary struct {
		BroadcastID uint64 `json:"broadcast_id"`
		After       string
		Succeeded   int64
		Engagement  struct{ Opened, Received int64 }
	}
	summaries := func() map[string][]summary {
		out := map[string][]summary{}
		for _, e := range rc.of("broadcast.engagement") {
			var x summary
			if err := json.Unmarshal(e.Data, &x); err != nil {
				t.Fatal(err)
			}
			out[x.After] = append(out[x.After], x)
		}
		return out
	}
	for _, stage := range []struct {
		name string
		ago  string
	}{{"1h", "61 MINUTE"}, {"24h", "1441 MINUTE"}} {
		s.MustExec("UPDATE broadcasts SET finished_at = UTC_TIMESTAMP(6) - INTERVAL "+stage.ago+" WHERE id IN (?, ?)", id, quiet.ID)
		// Two new instances, each with a pass at start, race for it.
		s.AddInstance()
		s.AddInstance()
		waitUntil(t, "the "+stage.name+" summary", 30*time.Second, func() bool { return len(summaries()[stage.name]) >= 1 })
		// A later pass (or instance) adds nothing: let every instance's
		// deliverer run a while, then count.
		time.Sleep(1500 * time.Millisecond)
		got := summaries()[stage.name]
		if len(got) != 1 || got[0].BroadcastID != id || got[0].Succeeded != 20 || got[0].Engagement.Opened != 7 {
			t.Fatalf("%s summaries %+v; want one, of broadcast %d: 20 succeeded, 7 opened", stage.name, got, id)
		}
	}
	var rows int
	if err := s.SQL.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE type = 'broadcast.engagement'").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("outbox holds %d summaries (%v), want 2 (1h and 24h of the tracked broadcast)", rows, err)
	}
	if rc.badlySigned() != 0 {
		t.Fatalf("%d deliveries failed the signature check", rc.badlySigned())
	}
}
