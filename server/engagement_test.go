package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/engagement"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

type eventsAnswer struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Refused    []struct {
		Index int    `json:"index"`
		Code  string `json:"code"`
	} `json:"refused"`
}

type event struct {
	Token string `json:"token"`
	Type  string `json:"type"`
	At    string `json:"at,omitempty"`
}

func postEvents(t *testing.T, s *teststack.Stack, evs []event) eventsAnswer {
	t.Helper()
	var a eventsAnswer
	if resp := s.DoAuth("POST", "/v1/events", "", map[string]any{"events": evs}, &a); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/events: %d %+v", resp.StatusCode, a)
	}
	return a
}

// engagementCounts reads the stored counts of broadcast id by type.
func engagementCounts(t *testing.T, s *teststack.Stack, id uint64) map[string]int64 {
	t.Helper()
	rows, err := s.SQL.Query("SELECT type, SUM(n) FROM engagement_counts WHERE broadcast_id = ? GROUP BY type", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names := map[int]string{1: "received", 2: "opened", 3: "clicked", 4: "dismissed"}
	out := map[string]int64{}
	for rows.Next() {
		var typ int
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			t.Fatal(err)
		}
		out[names[typ]] = n
	}
	return out
}

// sentTokens broadcasts to every seeded token and returns the event token
// each device got in data["pushfan"], as the emulator received it.
func sentTokens(t *testing.T, s *teststack.Stack, devices []string, extra map[string]any) (uint64, []string) {
	t.Helper()
	s.Emu.RecordMessages()
	var b teststack.Broadcast
	req := map[string]any{"title": "hi", "audience": map[string]any{"all": true}}
	maps.Copy(req, extra)
	s.Do("POST", "/push/broadcast", req, &b)
	if b.Status != "completed" || b.Succeeded != int64(len(devices)) {
		t.Fatalf("broadcast %+v, want %d succeeded", b, len(devices))
	}
	out := make([]string, len(devices))
	seen := map[string]bool{}
	for i, d := range devices {
		got, ok, err := s.Emu.LastNotification(d)
		if err != nil || !ok {
			t.Fatalf("device %s: recorded %v, %v", d, ok, err)
		}
		tok := got.Data["pushfan"]
		if tok == "" || len(tok) > engagement.MaxTokenBytes || strings.Contains(tok, d) {
			t.Fatalf("device %s got data[pushfan] %q: want a token of at most %d bytes without the FCM token", d, tok, engagement.MaxTokenBytes)
		}
		if seen[tok] {
			t.Fatalf("two devices got the same event token %q", tok)
		}
		seen[tok] = true
		out[i] = tok
	}
	return b.ID, out
}

// The end-to-end count: 1,000 tokens sent; 300 opens posted in
// batches, 50 of them twice, 20 with one byte flipped, and 10 clicks on
// targets not yet opened (a click counts an open too).
func TestEventsCountDistinctTargets(t *testing.T) {
	const public = "https://push.example.com"
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Events.PublicURL = public }})
	devices := tokens("eng-", 1000)
	s.SeedTokens(1, devices)
	// Platforms as apps write them: any case, or none (other).
	s.MustExec("UPDATE device_tokens SET platform = ELT(id % 4 + 1, 'android', 'IOS', 'web', NULL)")
	const link = "https://shop.example.com/sale?utm=push"
	id, toks := sentTokens(t, s, devices, map[string]any{"webpush": map[string]any{"fcm_options": map[string]any{"link": link}}})
	// Every outcome is in the stored send rate (the watch chart's backfill).
	var rate int64
	if err := s.SQL.QueryRow("SELECT COALESCE(SUM(n), 0) FROM send_rate WHERE broadcast_id = ?", id).Scan(&rate); err != nil || rate != 1000 {
		t.Fatalf("send rate holds %d outcomes (%v), want 1000", rate, err)
	}
	// The link sent is the redirect with the device's own token.
	rec, _, _ := s.Emu.LastNotification(devices[7])
	var sent struct {
		Webpush struct {
			FCMOptions struct{ Link string } `json:"fcm_options"`
		}
	}
	if err := json.Unmarshal(rec.Message, &sent); err != nil || sent.Webpush.FCMOptions.Link != public+"/v1/c/"+toks[7] {
		t.Fatalf("web push link sent %q (%v), want %q", sent.Webpush.FCMOptions.Link, err, public+"/v1/c/"+toks[7])
	}

	var accepted, dups int
	for i := 0; i < 300; i += 50 {
		var batch []event
		for _, tok := range toks[i : i+50] {
			batch = append(batch, event{Token: tok, Type: "opened"})
		}
		a := postEvents(t, s, batch)
		accepted, dups = accepted+a.Accepted, dups+a.Duplicates
		if len(a.Refused) != 0 {
			t.Fatalf("refused %+v", a.Refused)
		}
	}
	var again, flipped []event
	for _, tok := range toks[100:150] {
		again = append(again, event{Token: tok, Type: "opened"})
	}
	for _, tok := range toks[300:320] {
		b := []byte(tok)
		i := len(b) - 3 // inside the MAC: the token still decodes
		b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
		flipped = append(flipped, event{Token: string(b), Type: "opened"})
	}
	a := postEvents(t, s, append(again, flipped...))
	accepted, dups = accepted+a.Accepted, dups+a.Duplicates
	if len(a.Refused) != 20 {
		t.Fatalf("refused %d events, want the 20 flipped ones: %+v", len(a.Refused), a.Refused)
	}
	for k, r := range a.Refused {
		if r.Index != 50+k || r.Code != engagement.CodeBadSignature {
			t.Fatalf("refusal %d: %+v, want index %d bad_signature", k, r, 50+k)
		}
	}
	// Ten clicks through the redirect, on targets not yet opened.
	noFollow := *s.HTTP
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tok := range toks[500:510] {
		resp, err := noFollow.Get(s.API.URL + "/v1/c/" + tok)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != link {
			t.Fatalf("click: %d to %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), link)
		}
	}
	resp, err := noFollow.Get(s.API.URL + "/v1/c/" + toks[0] + "x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a link pushfan did not send: %d, want 404", resp.StatusCode)
	}
	if accepted != 300 || dups != 50 {
		t.Fatalf("accepted %d, duplicates %d; want 310 and 50", accepted, dups)
	}
	got := engagementCounts(t, s, id)
	if want := map[string]int64{"opened": 310, "clicked": 10}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	// Each under the platform its token carried (the device's, as its send
	// counted), once: the 300 opens, the 10 clicks and their opens.
	platformOf := s.PlatformOfTokens()
	wantPlat := map[string]int64{}
	for _, d := range append(devices[:300:300], devices[500:510]...) {
		wantPlat[platformOf[d]+"/opened"]++
	}
	for _, d := range devices[500:510] {
		wantPlat[platformOf[d]+"/clicked"]++
	}
	gotPlat := map[string]int64{}
	rows, err := s.SQL.Query("SELECT platform, type, n FROM engagement_platform_counts WHERE broadcast_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var code, typ uint8
		var n int64
		if err := rows.Scan(&code, &typ, &n); err != nil {
			t.Fatal(err)
		}
		name := "none"
		if code > 0 && int(code) <= len(model.Platforms) {
			name = model.Platforms[code-1]
		}
		gotPlat[name+"/"+model.EventType(typ).String()] = n
	}
	rows.Close()
	if fmt.Sprint(gotPlat) != fmt.Sprint(wantPlat) || len(wantPlat) != 8 {
		t.Fatalf("per platform %v, want %v", gotPlat, wantPlat)
	}
	// The metrics count the events committed: 300 opens, 10 clicks and
	// their 10 implied opens stored; the 50 opens posted again duplicates.
	m := scrape(t, s.HTTP, s.API.URL+"/metrics", teststack.AdminToken)
	if st, dup := m[`pushfan_events_ingested_total{result="stored"}`], m[`pushfan_events_ingested_total{result="duplicate"}`]; st != 320 || dup != 50 {
		t.Fatalf("pushfan_events_ingested_total: stored %v, duplicate %v; want 320 and 50", st, dup)
	}

	// The API shows them: the broadcast's funnel, its series, the totals.
	var view struct {
		Engagement struct {
			Received, Opened, Clicked, Dismissed int64
			OpenRate                             float64  `json:"open_rate"`
			P50                                  *float64 `json:"time_to_open_p50_s"`
		}
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &view)
	if e := view.Engagement; e.Opened != 310 || e.Clicked != 10 || e.Received != 0 || e.OpenRate != 0.31 || e.P50 == nil {
		t.Fatalf("engagement %+v, want 310 opened, 10 clicked, open rate 0.31 and a median time to open", e)
	}
	var series struct {
		Bucket string
		Points []struct{ Opened, Clicked int64 }
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/engagement?bucket=1h", id), nil, &series)
	var opened, clicked int64
	for _, p := range series.Points {
		opened, clicked = opened+p.Opened, clicked+p.Clicked
	}
	if series.Bucket != "1h" || opened != 310 || clicked != 10 {
		t.Fatalf("series %+v: opened %d clicked %d, want 310 and 10", series, opened, clicked)
	}
	var st struct{ Opened, Clicked int64 }
	s.Do("GET", "/push/stats", nil, &st)
	if st.Opened != 310 || st.Clicked != 10 {
		t.Fatalf("stats %+v, want 310 opened and 10 clicked", st)
	}
	var bad struct {
		Error struct{ Field string } `json:"error"`
	}
	if resp := s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/engagement?bucket=2m", id), nil, &bad); resp.StatusCode != http.StatusBadRequest || bad.Error.Field != "bucket" {
		t.Fatalf("bucket=2m: %d %+v", resp.StatusCode, bad)
	}
}

// Each refusal has its own code, and nothing refused is counted.
func TestEventsRefusedAreNotCounted(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	devices := tokens("ref-", 3)
	s.SeedTokens(1, devices)
	id, toks := sentTokens(t, s, devices, nil)

	// The deployment's own key, read back, signs an expired token.
	var kid string
	var secret []byte
	if err := s.SQL.QueryRow("SELECT kid, secret FROM event_keys").Scan(&kid, &secret); err != nil {
		t.Fatal(err)
	}
	own, err := engagement.NewKeys([]engagement.Key{{ID: kid, Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-30 * 24 * time.Hour)
	expired := own.Token(engagement.Claims{BroadcastID: id, Target: 1, UserID: 1, Sent: long, Expires: long.Add(time.Hour)})
	other, _ := engagement.NewKeys([]engagement.Key{{ID: kid, Secret: bytes.Repeat([]byte("x"), 32)}})
	stranger, _ := engagement.NewKeys([]engagement.Key{{ID: "elsewhere", Secret: secret}})
	claims := engagement.Claims{BroadcastID: id, Target: 1, UserID: 1, Sent: time.Now(), Expires: time.Now().Add(time.Hour)}
	a := postEvents(t, s, []event{
		{Token: expired, Type: "opened"},
		{Token: stranger.Token(claims), Type: "opened"},
		{Token: other.Token(claims), Type: "opened"},
		{Token: toks[0], Type: "liked"},
		{Token: toks[1], Type: "opened", At: "yesterday"},
		{Token: "not-a-token", Type: "opened"},
	})
	var codes []string
	for _, r := range a.Refused {
		codes = append(codes, r.Code)
	}
	want := []string{engagement.CodeExpired, engagement.CodeUnknownKey, engagement.CodeBadSignature, engagement.CodeUnknownType, engagement.CodeBadTime, engagement.CodeMalformed}
	if a.Accepted != 0 || a.Duplicates != 0 || !slices.Equal(codes, want) {
		t.Fatalf("answer %+v: codes %v, want %v and nothing accepted", a, codes, want)
	}

	// A body over the limit is refused whole.
	big := `{"events":[{"token":"` + strings.Repeat("a", 1<<20) + `","type":"opened"}]}`
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp := s.DoAuth("POST", "/v1/events", "", big, &e); resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Code != "body_too_large" {
		t.Fatalf("1 MB body: %d %+v", resp.StatusCode, e)
	}
	var many []event
	for range engagement.MaxEvents + 1 {
		many = append(many, event{Token: toks[2], Type: "opened"})
	}
	var e2 struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	if resp := s.DoAuth("POST", "/v1/events", "", map[string]any{"events": many}, &e2); resp.StatusCode != http.StatusBadRequest || e2.Error.Field != "events" {
		t.Fatalf("101 events: %d %+v", resp.StatusCode, e2)
	}
	if got := engagementCounts(t, s, id); len(got) != 0 {
		t.Fatalf("counted %v from refused events", got)
	}
}

// The events budget counts an IPv6 client by its /64, as the
// authentication budget does: one host holds the whole /64, and posting
// from each of its addresses must not multiply the budget.
func TestEventsBudgetCountsAnIPv6ClientByItsSlash64(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		// A burst of 1, and the next post allowed 100 s later: no refill
		// within the test, however slow the machine.
		c.Events.PerAddress = 0.01
		c.HTTP.TrustedProxies = []string{"127.0.0.1/32"}
	}})
	post := func(addr string) int {
		t.Helper()
		req, err := http.NewRequest("POST", s.API.URL+"/v1/events", strings.NewReader(`{"events":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", addr)
		resp, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("2001:db8:7:1::1"); code == http.StatusTooManyRequests {
		t.Fatalf("the first post: 429, within the burst")
	}
	if code := post("2001:db8:7:1:ffff::2"); code != http.StatusTooManyRequests {
		t.Fatalf("another address of the same /64: %d, want 429 (the /64 spent its burst)", code)
	}
	if code := post("2001:db8:7:2::1"); code == http.StatusTooManyRequests {
		t.Fatalf("another /64: 429, want its own budget")
	}
}
