package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const (
	aliceToken = "alice-secret-0123456789"
	bobToken   = "bob-secret-0123456789"
	heldViewer = "viewer-secret-0123456789"
)

func heldStack(t *testing.T, configure func(*config.Config)) *teststack.Stack {
	return teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = []string{teststack.AdminToken, "alice:approver:" + aliceToken, "bob:approver:" + bobToken, "dashboard:viewer:" + heldViewer}
		if configure != nil {
			configure(c)
		}
	}})
}

// hold submits a held broadcast to everyone as token and waits until its
// audience is counted (want targets).
func hold(t *testing.T, s *teststack.Stack, token string, want int64, extra map[string]any) teststack.Broadcast {
	t.Helper()
	body := map[string]any{"title": "held", "body": "b", "hold": true, "audience": map[string]any{"all": true}}
	for k, v := range extra {
		body[k] = v
	}
	var b teststack.Broadcast
	resp := s.DoAuth("POST", "/push/broadcast", token, body, &b)
	if resp.StatusCode != http.StatusAccepted || b.Status != "held" || b.HoldExpiresAt == nil || resp.Header.Get("Location") == "" {
		t.Fatalf("hold: %d %+v", resp.StatusCode, b)
	}
	waitUntil(t, fmt.Sprintf("held broadcast %d counted at %d targets", b.ID, want), 10*time.Second, func() bool {
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &b)
		if b.Status != "held" {
			t.Fatalf("held broadcast left held by itself: %+v", b)
		}
		return b.Targeted == want
	})
	return b
}

// assertNothingSentWhileHeld watches a held broadcast for several poll
// intervals of the dispatcher and promoter (50 ms each in the test stack):
// it stays held, has no chunk rows a dispatcher could claim, and the
// emulator receives nothing.
func assertNothingSentWhileHeld(t *testing.T, s *teststack.Stack, id uint64) {
	t.Helper()
	for i := 0; i < 10; i++ {
		time.Sleep(50 * time.Millisecond)
		var chunks int
		if err := s.SQL.Get(&chunks, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ?", id); err != nil {
			t.Fatal(err)
		}
		var b teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
		if st := s.Emu.Stats(); st.Requests != 0 || chunks != 0 || b.Status != "held" {
			t.Fatalf("while held: emulator %+v, %d chunk rows, broadcast %+v", st, chunks, b)
		}
	}
}

func TestHeldBroadcastSendsNothingUntilReleased(t *testing.T) {
	t.Parallel()
	s := heldStack(t, nil)
	toks := tokens("ok-", 1500) // two chunks at the test width of 1000
	s.SeedTokens(1, toks)
	b := hold(t, s, aliceToken, 1500, nil)
	if b.CreatedBy != "alice" {
		t.Fatalf("created_by %q", b.CreatedBy)
	}
	var page listPage
	s.Do("GET", "/push/broadcasts?status=held", nil, &page)
	if len(page.Broadcasts) != 1 || page.Broadcasts[0].ID != b.ID {
		t.Fatalf("list ?status=held: %+v", page)
	}
	assertNothingSentWhileHeld(t, s, b.ID)

	var e teststack.ErrorBody
	if resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), heldViewer, nil, &e); resp.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden" {
		t.Fatalf("viewer release: %d %+v", resp.StatusCode, e)
	}
	// Four-eyes is off: the creator may release.
	var r teststack.Broadcast
	if resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), aliceToken, nil, &r); resp.StatusCode != http.StatusOK ||
		(r.Status != "planning" && r.Status != "queued" && r.Status != "running" && r.Status != "completed") || r.ReleasedBy != "alice" || r.ReleasedAt == nil {
		t.Fatalf("release: %d %+v", resp.StatusCode, r)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if done.Status != "completed" || done.Targeted != 1500 || done.Succeeded != 1500 || done.Failed != 0 || done.Canceled != 0 ||
		done.ReleasedBy != "alice" || done.StartedAt == nil || done.StartedAt.Before(*r.ReleasedAt) {
		t.Fatalf("released broadcast: %+v", done)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Attempts != 1 || c.Accepted != 1 {
			t.Fatalf("token %s: %+v, want exactly one delivery", tk, c)
		}
	}
	if st := s.Emu.Stats(); st.Accepted != 1500 {
		t.Fatalf("emulator accepted %d, want 1500", st.Accepted)
	}
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "not_held" {
		t.Fatalf("second release: %d %+v", resp.StatusCode, e)
	}
	if resp := s.Do("POST", "/push/broadcasts/999999/release", nil, &e); resp.StatusCode != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Fatalf("release of an unknown broadcast: %d %+v", resp.StatusCode, e)
	}
}

func TestHeldBroadcastCanceled(t *testing.T) {
	t.Parallel()
	s := heldStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 40))
	b := hold(t, s, teststack.AdminToken, 40, nil)
	var c teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
	if c.Status != "canceled" || c.Targeted != 40 || c.Canceled != 40 || c.Succeeded != 0 || c.Failed != 0 || c.FinishedAt == nil || c.Error != nil {
		t.Fatalf("canceled held broadcast: %+v", c)
	}
	var e teststack.ErrorBody
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "not_held" {
		t.Fatalf("release after cancel: %d %+v", resp.StatusCode, e)
	}
	if st := s.Emu.Stats(); st.Requests != 0 {
		t.Fatalf("a canceled held broadcast sent: %+v", st)
	}
	var stats struct{ Broadcasts, Targeted, Succeeded, Canceled int64 }
	s.Do("GET", "/push/stats", nil, &stats)
	if stats.Broadcasts != 1 || stats.Targeted != 40 || stats.Canceled != 40 || stats.Succeeded != 0 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestHeldFourEyes(t *testing.T) {
	t.Parallel()
	s := heldStack(t, func(c *config.Config) { c.Engine.ReleaseFourEyes = true })
	toks := tokens("ok-", 30)
	s.SeedTokens(1, toks)
	b := hold(t, s, aliceToken, 30, nil)
	var e teststack.ErrorBody
	if resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), aliceToken, nil, &e); resp.StatusCode != http.StatusForbidden || e.Error.Code != "four_eyes_required" {
		t.Fatalf("creator's release with four eyes: %d %+v", resp.StatusCode, e)
	}
	assertNothingSentWhileHeld(t, s, b.ID)
	var r teststack.Broadcast
	if resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), bobToken, nil, &r); resp.StatusCode != http.StatusOK || r.ReleasedBy != "bob" {
		t.Fatalf("second token's release: %d %+v", resp.StatusCode, r)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if done.Status != "completed" || done.Succeeded != 30 || done.Targeted != 30 || done.CreatedBy != "alice" || done.ReleasedBy != "bob" {
		t.Fatalf("released broadcast: %+v", done)
	}
	if st := s.Emu.Stats(); st.Accepted != 30 {
		t.Fatalf("emulator accepted %d, want 30", st.Accepted)
	}
	// The audit names both: the creator's refused release and the second
	// token's release, newest first.
	var trail struct {
		Entries []struct {
			Action string
			Actor  struct{ Kind, Name string }
			Detail map[string]any
		}
	}
	if resp := s.Do("GET", fmt.Sprintf("/push/audit?target=broadcast:%d", b.ID), nil, &trail); resp.StatusCode != http.StatusOK {
		t.Fatalf("audit: %d", resp.StatusCode)
	}
	var got []string
	for _, e := range trail.Entries {
		got = append(got, e.Action+" "+e.Actor.Kind+":"+e.Actor.Name)
	}
	if want := []string{"broadcast.release token:bob", "broadcast.release.refused token:alice", "broadcast.create token:alice"}; !slices.Equal(got, want) {
		t.Fatalf("the broadcast's audit: %v, want %v", got, want)
	}
	if trail.Entries[1].Detail["rule"] != "four_eyes" {
		t.Errorf("the refusal's detail: %v, want the rule four_eyes", trail.Entries[1].Detail)
	}
}

func TestHeldBroadcastExpires(t *testing.T) {
	t.Parallel()
	coveredBy(t, "lease (TestExpireHoldsOncePerBroadcast)")
	s := heldStack(t, func(c *config.Config) { c.Engine.HoldExpiry = 1500 * time.Millisecond })
	s.AddInstance() // two promoters race for the expiry; one wins
	s.SeedTokens(1, tokens("ok-", 25))
	b := hold(t, s, teststack.AdminToken, 25, nil)
	if d := b.HoldExpiresAt.Sub(b.CreatedAt); d < time.Second || d > 3*time.Second {
		t.Fatalf("hold_expires_at %v is %v after created_at", b.HoldExpiresAt, d)
	}
	done := s.WaitFinished(b.ID, 15*time.Second)
	if done.Status != "canceled" || done.Error == nil || *done.Error != "hold expired" || done.Canceled != 25 || done.Targeted != 25 || done.Succeeded != 0 {
		t.Fatalf("expired hold: %+v", done)
	}
	if done.FinishedAt.Before(*b.HoldExpiresAt) {
		t.Fatalf("finished at %v, before the hold expired at %v", done.FinishedAt, b.HoldExpiresAt)
	}
	var e teststack.ErrorBody
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "not_held" {
		t.Fatalf("release after expiry: %d %+v", resp.StatusCode, e)
	}
	if st := s.Emu.Stats(); st.Requests != 0 {
		t.Fatalf("an expired hold sent: %+v", st)
	}
}

// A held broadcast whose send_at is still ahead at its release waits for
// it, scheduled.
func TestHeldWithSendAtBecomesScheduledAtRelease(t *testing.T) {
	s := heldStack(t, nil)
	s.SeedTokens(1, tokens("ok-", 10))
	sendAt := time.Now().Add(2 * time.Second)
	b := hold(t, s, teststack.AdminToken, 10, map[string]any{"send_at": sendAt.Format(time.RFC3339Nano)})
	var r teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/release", b.ID), nil, &r); resp.StatusCode != http.StatusOK || r.Status != "scheduled" {
		t.Fatalf("release before send_at: %d %+v", resp.StatusCode, r)
	}
	done := s.WaitFinished(b.ID, 15*time.Second)
	if done.Status != "completed" || done.Succeeded != 10 || done.StartedAt.Before(sendAt.Add(-time.Millisecond)) {
		t.Fatalf("scheduled release: %+v (send_at %v)", done, sendAt)
	}
	if st := s.Emu.Stats(); st.Accepted != 10 {
		t.Fatalf("emulator accepted %d, want 10", st.Accepted)
	}
}

// A held broadcast is rehearsed before its release: its stored message,
// overrides and the chosen language included, goes to one device now,
// and the broadcast itself stays held with nothing sent to its audience.
func TestTestSendOfAHeldBroadcast(t *testing.T) {
	t.Parallel()
	s := heldStack(t, nil)
	s.Emu.RecordMessages()
	audience := []string{"ok-held-a", "ok-held-b", "ok-held-c"}
	s.SeedTokens(1, audience)
	const device = "ok-operator-phone-000001"
	b := hold(t, s, aliceToken, 3, map[string]any{
		"localized": map[string]any{"ko": map[string]string{"title": "안녕", "body": "세일"}},
		"android":   map[string]any{"notification": map[string]string{"channel_id": "promo"}},
	})
	var got testSendAnswer
	resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/test", b.ID), bobToken, map[string]any{"tokens": []string{device}, "locale": "ko-KR"}, &got)
	if resp.StatusCode != http.StatusOK || got.Succeeded != 1 || len(got.Results) != 1 || got.Results[0].Outcome != "succeeded" {
		t.Fatalf("test send of held broadcast: %d %+v", resp.StatusCode, got)
	}
	rec, ok, err := s.Emu.LastNotification(device)
	if err != nil || !ok || rec.Title != "안녕" || rec.Body != "세일" || !strings.Contains(string(rec.Message), `"channel_id":"promo"`) {
		t.Fatalf("the device got %+v (ok %v, err %v); want the ko variant with the android override", rec, ok, err)
	}
	for _, tk := range audience {
		if n := s.Emu.Counts(tk).Attempts; n != 0 {
			t.Fatalf("audience token %s got %d requests while the broadcast was held", tk, n)
		}
	}
	// Message fields are the broadcast's own: the body names only recipients.
	var e map[string]any
	if resp := s.DoAuth("POST", fmt.Sprintf("/push/broadcasts/%d/test", b.ID), bobToken, map[string]any{"tokens": []string{device}, "title": "other"}, &e); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a message field in a broadcast's test send: %d %v, want 400", resp.StatusCode, e)
	}
	if resp := s.DoAuth("POST", "/push/broadcasts/999999/test", bobToken, map[string]any{"tokens": []string{device}}, &e); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("test send of an unknown broadcast: %d %v, want 404", resp.StatusCode, e)
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &b)
	if b.Status != "held" || b.Succeeded != 0 {
		t.Fatalf("after the test send the broadcast is %+v; want still held, nothing sent", b)
	}
}
