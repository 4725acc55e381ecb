package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"pushfan/broadcast/message"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// A 50/50 split over 2,000 users (1 to 3 devices each): every device of a
// user got the same variant, the one the hash of broadcast and user picks;
// the split is about even; the sends per variant are what the emulator
// received; and the opens reported per variant come back side by side.
func TestABVariantsSplitByUser(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	pop := s.SeedPopulation(2000)
	s.Emu.RecordMessages()
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{
		"audience": map[string]any{"all": true},
		"variants": []map[string]any{
			{"name": "short", "weight": 50, "title": "Sale", "body": "Now"},
			{"name": "long", "weight": 50, "title": "Our biggest sale", "body": "Starts now, ends Sunday", "data": map[string]string{"v": "2"}},
		},
	}, &b)
	if resp.StatusCode != http.StatusOK || b.Status != "completed" {
		t.Fatalf("broadcast: %d %+v", resp.StatusCode, b)
	}
	titles := map[string]string{"Sale": "short", "Our biggest sale": "long"}
	byUser := map[uint64]string{}
	received := map[string]int64{}
	opens := map[string][]string{}
	for _, tok := range pop.Eligible() {
		got, ok, err := s.Emu.LastNotification(tok.Token)
		if err != nil || !ok {
			t.Fatalf("token %s: recorded %v %v", tok.Token, ok, err)
		}
		v := titles[got.Title]
		if v == "" {
			t.Fatalf("token %s got title %q, of no variant", tok.Token, got.Title)
		}
		if prev, seen := byUser[tok.UserID]; seen && prev != v {
			t.Fatalf("user %d got both %s and %s", tok.UserID, prev, v)
		}
		if want := []string{"short", "long"}[message.PickVariant(b.ID, tok.UserID, []int{50, 50})]; v != want {
			t.Fatalf("user %d got %s, the hash picks %s", tok.UserID, v, want)
		}
		byUser[tok.UserID] = v
		received[v]++
		if tok.Dead == "" && len(opens[v]) < 100 {
			opens[v] = append(opens[v], got.Data["pushfan"])
		}
	}
	if fmt.Sprint(b.Variants) != fmt.Sprint(map[string]int64(received)) {
		t.Fatalf("sends per variant %v, the emulator received %v", b.Variants, received)
	}
	users := map[string]int{}
	for _, v := range byUser {
		users[v]++
	}
	if share := float64(users["short"]) / float64(len(byUser)); share < 0.45 || share > 0.55 {
		t.Fatalf("split %v: short has %.1f %% of the users", users, 100*share)
	}

	// 100 opens of short, 50 of long: side by side, with the difference.
	var evs []event
	for _, tok := range opens["short"] {
		evs = append(evs, event{Token: tok, Type: "opened"})
	}
	if a := postEvents(t, s, evs); a.Accepted != 100 {
		t.Fatalf("short opens: %+v", a)
	}
	evs = evs[:0]
	for _, tok := range opens["long"][:50] {
		evs = append(evs, event{Token: tok, Type: "opened"})
	}
	if a := postEvents(t, s, evs); a.Accepted != 50 {
		t.Fatalf("long opens: %+v", a)
	}
	var view struct {
		Engagement struct {
			Opened   int64
			Variants []struct {
				Name     string
				Sent     int64
				Opened   int64
				OpenRate float64     `json:"open_rate"`
				Diff     *float64    `json:"open_rate_diff"`
				CI       *[2]float64 `json:"open_rate_diff_ci95"`
			}
		}
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &view)
	vs := view.Engagement.Variants
	if view.Engagement.Opened != 150 || len(vs) != 2 || vs[0].Name != "short" || vs[0].Opened != 100 || vs[1].Opened != 50 ||
		vs[0].Sent != received["short"] || vs[1].Sent != received["long"] || vs[0].Diff != nil || vs[1].Diff == nil || vs[1].CI == nil {
		t.Fatalf("variants side by side: %+v", view.Engagement)
	}
	want := float64(50)/float64(received["long"]) - float64(100)/float64(received["short"])
	if d := *vs[1].Diff; d-want > 1e-9 || want-d > 1e-9 || vs[1].CI[0] >= d || vs[1].CI[1] <= d {
		t.Fatalf("difference %v (CI %v), want %v inside its interval", d, *vs[1].CI, want)
	}
}

// Bad variants are refused naming the field.
func TestABVariantsRefused(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"one variant", map[string]any{"variants": []map[string]any{{"weight": 1, "title": "x"}}}, "variants"},
		{"six variants", map[string]any{"variants": []map[string]any{{"weight": 1, "title": "a"}, {"weight": 1, "title": "b"}, {"weight": 1, "title": "c"}, {"weight": 1, "title": "d"}, {"weight": 1, "title": "e"}, {"weight": 1, "title": "f"}}}, "variants"},
		{"a title beside them", map[string]any{"title": "x", "variants": []map[string]any{{"weight": 1, "title": "a"}, {"weight": 1, "title": "b"}}}, "title"},
		{"no weight", map[string]any{"variants": []map[string]any{{"weight": 1, "title": "a"}, {"title": "b"}}}, "variants[1].weight"},
		{"an empty variant", map[string]any{"variants": []map[string]any{{"weight": 1, "title": "a"}, {"weight": 1}}}, "variants[1]"},
		{"a reserved data key", map[string]any{"variants": []map[string]any{{"weight": 1, "title": "a", "data": map[string]string{"pushfan": "x"}}, {"weight": 1, "title": "b"}}}, "variants[0].data.pushfan"},
		{"the same name twice", map[string]any{"variants": []map[string]any{{"name": "x", "weight": 1, "title": "a"}, {"name": "x", "weight": 1, "title": "b"}}}, "variants[1].name"},
	} {
		tc.body["audience"] = map[string]any{"all": true}
		var e struct {
			Error struct{ Code, Field string } `json:"error"`
		}
		if resp := s.Do("POST", "/push/broadcast", tc.body, &e); resp.StatusCode != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("%s: %d %+v, want 400 naming %s", tc.name, resp.StatusCode, e, tc.field)
		}
	}
}

// A click on an A/B variant's data link leads to that variant's link.
func TestABVariantsClickLeadsToTheirOwnLink(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Events.PublicURL = "https://push.example.com" }})
	devices := tokens("abclick-", 40)
	s.SeedTokens(1, devices)
	s.Emu.RecordMessages()
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"audience": map[string]any{"all": true}, "variants": []map[string]any{
		{"name": "a", "weight": 1, "title": "A", "data": map[string]string{"u": "https://a.example.com/x"}, "link_data_key": "u"},
		{"name": "b", "weight": 1, "title": "B", "data": map[string]string{"u": "https://b.example.com/y"}, "link_data_key": "u"},
	}}, &b)
	if b.Status != "completed" {
		t.Fatalf("broadcast %+v", b)
	}
	noFollow := *s.HTTP
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	want := map[string]string{"A": "https://a.example.com/x", "B": "https://b.example.com/y"}
	seen := map[string]bool{}
	for _, d := range devices {
		got, _, _ := s.Emu.LastNotification(d)
		sent := got.Data["u"]
		if !strings.HasPrefix(sent, "https://push.example.com/v1/c/") || !strings.HasSuffix(sent, "/d") {
			t.Fatalf("data link sent %q, want the click redirect", sent)
		}
		resp, err := noFollow.Get(s.API.URL + strings.TrimPrefix(sent, "https://push.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want[got.Title] {
			t.Fatalf("variant %s's click: %d to %q, want %q", got.Title, resp.StatusCode, resp.Header.Get("Location"), want[got.Title])
		}
		seen[got.Title] = true
	}
	if !seen["A"] || !seen["B"] {
		t.Fatalf("only variants %v were sent to 40 users", seen)
	}
}
