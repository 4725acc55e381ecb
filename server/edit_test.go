package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// PATCH /push/broadcasts/{id} on the real stack: a field error is the one
// the submit of the same message and time gets; a good edit changes the
// message and the time and keeps the status (a held one stays held for its
// approver); a released or canceled broadcast is refused with 409 naming
// why; each accepted edit is audited once.
func TestEditUnstartedBroadcast(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, tokens("ok-", 3))
	type view struct {
		ID       uint64     `json:"id"`
		Status   string     `json:"status"`
		SendAt   *time.Time `json:"send_at"`
		StartsAt *time.Time `json:"starts_at"`
		Message  struct {
			Title string `json:"title"`
		} `json:"message"`
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	submit := func(extra map[string]any) view {
		t.Helper()
		body := map[string]any{"title": "Old", "body": "b", "audience": map[string]any{"user_ids": []int{1}}, "send_at": at.Format(time.RFC3339)}
		for k, v := range extra {
			body[k] = v
		}
		var b view
		if resp := s.Do("POST", "/push/broadcast", body, &b); resp.StatusCode != 202 && resp.StatusCode != 200 {
			t.Fatalf("submit: %d %+v", resp.StatusCode, b)
		}
		return b
	}
	b := submit(nil)
	path := fmt.Sprintf("/push/broadcasts/%d", b.ID)

	// The same mistakes, the same answers as a submit's.
	for _, bad := range []map[string]any{
		{"title": "x", "send_at": "2020-01-01T00:00:00Z"},
		{"title": "x", "send_at": "tomorrow"},
		{"title": "x", "send_at": time.Now().Add(400 * 24 * time.Hour).Format(time.RFC3339)},
		{"data": map[string]string{"from": "x"}},
	} {
		var edit, sub teststack.ErrorBody
		resp := s.Do("PATCH", path, bad, &edit)
		full := map[string]any{"audience": map[string]any{"user_ids": []int{1}}}
		for k, v := range bad {
			full[k] = v
		}
		s.Do("POST", "/push/broadcast", full, &sub)
		if resp.StatusCode != 400 || edit.Error.Code == "" || edit.Error.Code != sub.Error.Code || edit.Error.Field != sub.Error.Field {
			t.Errorf("edit %v: %d %+v; the submit's: %+v", bad, resp.StatusCode, edit.Error, sub.Error)
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("PATCH", path, map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &e); resp.StatusCode != 400 || e.Error.Field != "audience" {
		t.Errorf("an audience in the edit: %d %+v", resp.StatusCode, e.Error)
	}

	later := at.Add(time.Hour)
	var got view
	if resp := s.Do("PATCH", path, map[string]any{"title": "New", "body": "b2", "send_at": later.Format(time.RFC3339)}, &got); resp.StatusCode != 200 ||
		got.Status != "scheduled" || got.Message.Title != "New" || got.SendAt == nil || !got.SendAt.Equal(later) || got.StartsAt == nil || got.StartsAt.Before(later) {
		t.Fatalf("edit: %d %+v", resp.StatusCode, got)
	}

	held := submit(map[string]any{"hold": true})
	hpath := fmt.Sprintf("/push/broadcasts/%d", held.ID)
	if resp := s.Do("PATCH", hpath, map[string]any{"title": "Held, edited"}, &got); resp.StatusCode != 200 || got.Status != "held" || got.Message.Title != "Held, edited" || got.SendAt == nil || !got.SendAt.Equal(at) {
		t.Fatalf("edit of a held one: %d %+v", resp.StatusCode, got)
	}
	if resp := s.Do("POST", hpath+"/release", nil, &got); resp.StatusCode != 200 || got.Status != "scheduled" {
		t.Fatalf("release: %d %+v", resp.StatusCode, got)
	}
	if resp := s.Do("PATCH", hpath, map[string]any{"title": "After approval"}, &e); resp.StatusCode != 409 || e.Error.Code != "already_released" {
		t.Fatalf("edit after the release: %d %+v", resp.StatusCode, e.Error)
	}
	if resp := s.Do("POST", path+"/cancel", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	if resp := s.Do("PATCH", path, map[string]any{"title": "Too late"}, &e); resp.StatusCode != 409 || e.Error.Code != "already_started" {
		t.Fatalf("edit after the cancel: %d %+v", resp.StatusCode, e.Error)
	}
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM audit_entries WHERE action = 'broadcast.edit'"); err != nil || n != 2 {
		t.Fatalf("%d broadcast.edit entries (%v), want 2: one per accepted edit", n, err)
	}
}

// With four eyes, a held broadcast is not edited by anyone: bob, an
// approver, cannot edit alice's text and release his own words; nor can
// alice change the text between bob's reading and his release. Bob
// releases the text he read.
func TestEditHeldWithFourEyes(t *testing.T) {
	s := heldStack(t, func(c *config.Config) { c.Engine.ReleaseFourEyes = true })
	s.SeedTokens(1, tokens("ok-", 3))
	b := hold(t, s, aliceToken, 3, nil)
	path := fmt.Sprintf("/push/broadcasts/%d", b.ID)
	for who, token := range map[string]string{"the approver": bobToken, "the creator": aliceToken} {
		var e teststack.ErrorBody
		if resp := s.DoAuth("PATCH", path, token, map[string]any{"title": "changed after reading"}, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "four_eyes_required" {
			t.Fatalf("%s's edit: %d %+v, want 409 four_eyes_required", who, resp.StatusCode, e)
		}
	}
	var got teststack.Broadcast
	if resp := s.DoAuth("POST", path+"/release", bobToken, nil, &got); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's release: %d", resp.StatusCode)
	}
	if done := s.WaitFinished(b.ID, 30*time.Second); done.Status != "completed" || done.Succeeded != 3 {
		t.Fatalf("after the release: %+v", done)
	}
	var title string
	if err := s.SQL.Get(&title, "SELECT JSON_VALUE(message, '$.title') FROM broadcasts WHERE id = ?", b.ID); err != nil || title != "held" {
		t.Fatalf("sent title %q (%v)", title, err)
	}
}
