package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/internal/testsupport/teststack"
)

type listPage struct {
	Broadcasts []struct {
		ID      uint64 `json:"id"`
		Status  string `json:"status"`
		Trigger string `json:"trigger"`
	} `json:"broadcasts"`
	NextCursor *string `json:"next_cursor"`
}

func TestSendAtFiresOnceOnTimeWithTwoInstances(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	s.AddInstance()
	toks := tokens("ok-", 300)
	s.SeedTokens(1, toks)
	sendAt := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	var b struct {
		teststack.Broadcast
		Trigger string     `json:"trigger"`
		SendAt  *time.Time `json:"send_at"`
	}
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "later", "send_at": sendAt.Format(time.RFC3339Nano), "audience": map[string]any{"all": true}}, &b)
	if resp.StatusCode != http.StatusAccepted || b.Status != "scheduled" || b.Trigger != "schedule" || b.SendAt == nil || !b.SendAt.Equal(sendAt) {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	var page listPage
	s.Do("GET", "/push/broadcasts?status=scheduled", nil, &page)
	if len(page.Broadcasts) != 1 || page.Broadcasts[0].ID != b.ID {
		t.Fatalf("scheduled list %+v", page)
	}
	if s.Emu.Stats().Requests != 0 {
		t.Fatal("sent before send_at")
	}
	final := s.WaitFinished(b.ID, 30*time.Second)
	if final.Status != "completed" || final.Succeeded != 300 || final.StartedAt == nil {
		t.Fatalf("final %+v", final)
	}
	if final.StartedAt.Before(sendAt) || final.StartedAt.After(sendAt.Add(3*time.Second)) {
		t.Fatalf("started at %v for send_at %v", final.StartedAt, sendAt)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Accepted != 1 {
			t.Fatalf("%s accepted %d times with two instances", tk, c.Accepted)
		}
	}
}

func TestScheduledBroadcastCanBeCanceledBeforeItStarts(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, tokens("ok-", 10))
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "send_at": time.Now().Add(time.Hour).Format(time.RFC3339), "audience": map[string]any{"all": true}}, &b)
	var c teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c); resp.StatusCode != 200 || c.Status != "canceled" {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
	var page listPage
	s.Do("GET", "/push/broadcasts?status=scheduled", nil, &page)
	if len(page.Broadcasts) != 0 {
		t.Fatalf("still listed as scheduled: %+v", page)
	}
	if s.Emu.Stats().Requests != 0 {
		t.Fatal("a canceled scheduled broadcast sent something")
	}
}

func TestSendAtValidation(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	for value, code := range map[string]string{
		time.Now().Add(-time.Minute).Format(time.RFC3339):         "send_at_in_past",
		time.Now().Add(400 * 24 * time.Hour).Format(time.RFC3339): "send_at_too_far",
		"2026-12-01T18:00:00": "invalid_value", // no offset
		"tomorrow":            "invalid_value",
	} {
		var e teststack.ErrorBody
		resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "send_at": value, "audience": map[string]any{"all": true}}, &e)
		if resp.StatusCode != 400 || e.Error.Code != code || e.Error.Field != "send_at" {
			t.Errorf("send_at %q: %d %+v, want %s", value, resp.StatusCode, e, code)
		}
	}
}

func TestListBroadcastsPaginationAndFilters(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, tokens("ok-", 3))
	for range 5 {
		s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, nil)
	}
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "send_at": time.Now().Add(time.Hour).Format(time.RFC3339), "audience": map[string]any{"all": true}}, nil)
	seen := map[uint64]bool{}
	var last uint64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 { // 3 expected: a cursor that does not advance would loop forever
			t.Fatalf("still paging after %d pages", pages)
		}
		var p listPage
		path := "/push/broadcasts?limit=2&trigger=api"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		s.Do("GET", path, nil, &p)
		for _, b := range p.Broadcasts {
			if seen[b.ID] || (last != 0 && b.ID >= last) || b.Trigger != "api" {
				t.Fatalf("bad page entry %+v after %d", b, last)
			}
			seen[b.ID], last = true, b.ID
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if len(seen) != 5 {
		t.Fatalf("listed %d api broadcasts, want 5", len(seen))
	}
	for q, code := range map[string]string{"?status=done": "invalid_value", "?trigger=x": "invalid_value", "?cursor=x": "invalid_cursor", "?limit=0": "invalid_value"} {
		var e teststack.ErrorBody
		if resp := s.Do("GET", "/push/broadcasts"+q, nil, &e); resp.StatusCode != 400 || e.Error.Code != code {
			t.Errorf("%s: %d %+v", q, resp.StatusCode, e)
		}
	}
}
