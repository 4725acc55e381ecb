package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// A phone offline through six broadcasts gets all six when it returns:
// no broadcast is collapsible unless its request asks (FCM keeps at most
// four collapse keys per offline device), and each folds on the display
// by its own tag. Six broadcasts that do ask for six collapse keys reach
// it four times, as FCM's store allows.
func TestAnOfflinePhoneGetsEveryBroadcast(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, []string{"phone-1"})
	s.Emu.Offline("phone-1")
	send := func(i int, android map[string]any) {
		t.Helper()
		req := map[string]any{"title": fmt.Sprintf("news %d", i), "body": "b", "audience": map[string]any{"all": true}}
		if android != nil {
			req["android"] = android
		}
		var b teststack.Broadcast
		s.Do(http.MethodPost, "/push/broadcast", req, &b)
		if b = s.WaitFinished(b.ID, time.Minute); b.Succeeded != 1 {
			t.Fatalf("broadcast %d: %+v, want the one token succeeded", i, b)
		}
	}
	for i := range 6 {
		send(i, nil)
	}
	got, deleted := s.Emu.Online("phone-1")
	if len(got) != 6 || deleted {
		t.Fatalf("the phone got %d of 6 broadcasts (deleted %v): %v", len(got), deleted, titlesOf(got))
	}
	tags := map[string]bool{}
	for i, m := range got {
		if m.CollapseKey != "" || m.Tag == "" || tags[m.Tag] || m.Title != fmt.Sprintf("news %d", i) {
			t.Fatalf("message %d: %q, collapse key %q, tag %q; want no collapse key and a tag of its own", i, m.Title, m.CollapseKey, m.Tag)
		}
		tags[m.Tag] = true
	}
	if shown := fcmemu.Shown(got); len(shown) != 6 {
		t.Fatalf("the tray shows %d of 6", len(shown))
	}

	s.Emu.Offline("phone-1")
	for i := range 6 {
		send(i, map[string]any{"collapse_key": fmt.Sprintf("topic-%d", i)})
	}
	if got, _ := s.Emu.Online("phone-1"); len(got) != 4 {
		t.Fatalf("six collapse keys: the phone got %d, want FCM's four", len(got))
	}
}

// Bulk goes at normal priority (apns-priority 5) and is kept four weeks;
// transactional at high (10), kept a day; a request's own priority wins;
// the defaults are the configuration's.
func TestPriorityAndLifetimeByClass(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Delivery.Transactional.TTL = 2 * time.Hour
	}})
	s.SeedTokens(1, []string{"dev-1"})
	s.Emu.RecordMessages()
	type sent struct {
		Android struct {
			Priority     string `json:"priority"`
			TTL          string `json:"ttl"`
			CollapseKey  string `json:"collapse_key"`
			Notification struct {
				Tag string `json:"tag"`
			} `json:"notification"`
		} `json:"android"`
		APNS struct {
			Headers map[string]string `json:"headers"`
		} `json:"apns"`
	}
	cases := []struct {
		name                    string
		req                     map[string]any
		priority, ttl, apnsPrio string
	}{
		{"bulk", map[string]any{"audience": map[string]any{"all": true}}, "normal", "2419200s", "5"},
		{"transactional", map[string]any{"audience": map[string]any{"user_ids": []int{1}}}, "high", "7200s", "10"},
		{"bulk, the request's priority", map[string]any{"audience": map[string]any{"all": true}, "android": map[string]any{"priority": "high"}}, "high", "2419200s", "5"},
	}
	for _, tc := range cases {
		tc.req["title"], tc.req["body"] = "t", "b"
		var b teststack.Broadcast
		s.Do(http.MethodPost, "/push/broadcast", tc.req, &b)
		b = s.WaitFinished(b.ID, time.Minute)
		raw, ok := s.Emu.LastMessage("dev-1")
		if !ok || b.Succeeded != 1 {
			t.Fatalf("%s: %+v, recorded %v", tc.name, b, ok)
		}
		var m sent
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("pushfan-%d", b.ID)
		if m.Android.Priority != tc.priority || m.Android.TTL != tc.ttl || m.APNS.Headers["apns-priority"] != tc.apnsPrio ||
			m.Android.CollapseKey != "" || m.Android.Notification.Tag != tag || m.APNS.Headers["apns-collapse-id"] != tag {
			t.Errorf("%s: FCM received %s, want priority %s, ttl %s, apns-priority %s, tag %s and no collapse key",
				tc.name, raw, tc.priority, tc.ttl, tc.apnsPrio, tag)
		}
	}
}

func titlesOf(got []fcmemu.Delivered) []string {
	out := make([]string, len(got))
	for i, m := range got {
		out[i] = m.Title
	}
	return out
}
