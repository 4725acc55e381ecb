package server_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

type campaignRow struct {
	Group       string  `json:"group"`
	PeriodStart string  `json:"period_start"`
	Broadcasts  int64   `json:"broadcasts"`
	Targeted    int64   `json:"targeted"`
	Succeeded   int64   `json:"succeeded"`
	Failed      int64   `json:"failed"`
	Opened      int64   `json:"opened"`
	Clicked     int64   `json:"clicked"`
	Reach       float64 `json:"reach"`
	CTR         float64 `json:"ctr"`
}

type campaignTrends struct {
	TZ   string        `json:"tz"`
	From string        `json:"from"`
	To   string        `json:"to"`
	Rows []campaignRow `json:"rows"`
}

// getRaw answers GET path's status and body as they came.
func getRaw(t *testing.T, s *teststack.Stack, path string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", s.API.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw), resp.Header
}

// Three broadcasts sent through the stack, opened and clicked through the
// events route, come back per category and ISO week of Seoul with exactly
// their counters (succeeded: what the emulator accepted); one finished on
// a Sunday evening UTC is in Seoul's next week; the CSV is the same rows;
// every bad parameter is a 400 naming it.
func TestCampaignsSumTheBroadcastsPerCategoryAndSeoulWeek(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Categories = []config.Category{{Name: "promo"}, {Name: "news"}}
	}})
	pop := s.SeedPopulation(120)
	// Platforms as apps write them: any case, or none (other).
	s.MustExec("UPDATE device_tokens SET platform = ELT(id % 4 + 1, 'android', 'IOS', 'web', NULL)")
	s.Emu.RecordMessages()
	live := 0
	for _, tok := range pop.Eligible() {
		if tok.Dead == "" {
			live++
		}
	}
	// send broadcasts one message and opens the first opens of its live
	// devices (clicks: the first clicks of those), through /v1/events;
	// openedBy and clickedBy are the devices opened and clicked, each
	// once per broadcast.
	var openedBy, clickedBy []string
	send := func(category, label string, opens, clicks int) teststack.Broadcast {
		t.Helper()
		body := map[string]any{"title": "t " + category, "category": category, "audience": map[string]any{"all": true}}
		if label != "" {
			body["analytics_label"] = label
		}
		var b teststack.Broadcast
		if resp := s.Do("POST", "/push/broadcast?wait=0", body, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d", resp.StatusCode)
		}
		b = s.WaitFinished(b.ID, 2*time.Minute)
		// The first one invalidates the dead tokens: the others target
		// the live ones only.
		if b.Status != "completed" || b.Succeeded != int64(live) || b.Targeted != b.Succeeded+b.Failed {
			t.Fatalf("broadcast %+v: want completed, %d accepted by the emulator", b, live)
		}
		var evs []event
		n := 0
		for _, tok := range pop.Eligible() {
			if tok.Dead != "" || n == opens {
				continue
			}
			got, ok, err := s.Emu.LastNotification(tok.Token)
			if err != nil || !ok {
				t.Fatalf("token %s: %v %v", tok.Token, ok, err)
			}
			evs = append(evs, event{Token: got.Data["pushfan"], Type: "opened"})
			openedBy = append(openedBy, tok.Token)
			if n < clicks {
				evs = append(evs, event{Token: got.Data["pushfan"], Type: "clicked"})
				clickedBy = append(clickedBy, tok.Token)
			}
			n++
		}
		if len(evs) == 0 {
			return b
		}
		if a := postEvents(t, s, evs); a.Accepted != opens+clicks {
			t.Fatalf("events of %d: %+v", b.ID, a)
		}
		return b
	}
	a := send("promo", "bf", 30, 9)
	b := send("promo", "", 4, 2)
	c := send("news", "", 0, 0)
	// Their finishes, fixed: a on Sunday 16:30 UTC (Monday 01:30 in Seoul),
	// b on the Wednesday before, c on the Tuesday after; a dry run of
	// promo on that Tuesday counts nowhere.
	s.MustExec("UPDATE broadcasts SET finished_at = ? WHERE id = ?", "2026-11-29 16:30:00", a.ID)
	s.MustExec("UPDATE broadcasts SET finished_at = ? WHERE id = ?", "2026-11-25 10:00:00", b.ID)
	s.MustExec("UPDATE broadcasts SET finished_at = ? WHERE id = ?", "2026-12-01 10:00:00", c.ID)
	var dry teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "d", "category": "promo", "dry_run": true, "audience": map[string]any{"all": true}}, &dry); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("dry run: %d", resp.StatusCode)
	}
	s.WaitFinished(dry.ID, 2*time.Minute)
	s.MustExec("UPDATE broadcasts SET finished_at = ? WHERE id = ?", "2026-12-01 11:00:00", dry.ID)

	// row sums the broadcasts' counters as their own views show them.
	row := func(group, start string, bs []teststack.Broadcast, opened, clicked int64) campaignRow {
		r := campaignRow{Group: group, PeriodStart: start, Broadcasts: int64(len(bs)), Opened: opened, Clicked: clicked}
		for _, b := range bs {
			r.Targeted, r.Succeeded, r.Failed = r.Targeted+b.Targeted, r.Succeeded+b.Succeeded, r.Failed+b.Failed
		}
		r.Reach, r.CTR = float64(r.Succeeded)/float64(r.Targeted), float64(clicked)/float64(r.Succeeded)
		return r
	}
	const query = "/push/campaigns?group=category&interval=week&tz=Asia/Seoul&from=2026-11-20&to=2026-12-05"
	var got campaignTrends
	if resp := s.Do("GET", query, nil, &got); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", query, resp.StatusCode)
	}
	want := []campaignRow{
		row("news", "2026-11-30T00:00:00+09:00", []teststack.Broadcast{c}, 0, 0),
		row("promo", "2026-11-23T00:00:00+09:00", []teststack.Broadcast{b}, 4, 2),
		row("promo", "2026-11-30T00:00:00+09:00", []teststack.Broadcast{a}, 30, 9),
	}
	if got.TZ != "Asia/Seoul" || !slices.Equal(got.Rows, want) {
		t.Fatalf("Seoul weeks:\n%+v\nwant\n%+v", got, want)
	}
	// In UTC, a is in b's week.
	var utc campaignTrends
	s.Do("GET", "/push/campaigns?group=category&interval=week&from=2026-11-20&to=2026-12-05", nil, &utc)
	promo := row("promo", "2026-11-23T00:00:00Z", []teststack.Broadcast{a, b}, 34, 11)
	if len(utc.Rows) != 2 || utc.Rows[1] != promo {
		t.Fatalf("UTC weeks: %+v, want promo %+v", utc.Rows, promo)
	}
	// By label: a's own, the category's name for the others.
	var labels campaignTrends
	s.Do("GET", "/push/campaigns?group=label&interval=week&from=2026-11-20&to=2026-12-05", nil, &labels)
	if len(labels.Rows) != 3 || labels.Rows[0].Group != "bf" || labels.Rows[1].Group != "news" || labels.Rows[2].Group != "promo" || labels.Rows[2].Opened != 4 {
		t.Fatalf("by label: %+v", labels.Rows)
	}

	// The CSV is the JSON's rows.
	status, body, h := getRaw(t, s, query+"&format=csv")
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") || !strings.Contains(h.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv: %d %v", status, h)
	}
	lines, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1+len(want) || strings.Join(lines[0], ",") != "group,period_start,broadcasts,targeted,succeeded,failed,opened,clicked,reach,ctr" {
		t.Fatalf("csv:\n%s", body)
	}
	for i, w := range want {
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
		exp := []string{w.Group, w.PeriodStart[:10], fmt.Sprint(w.Broadcasts), fmt.Sprint(w.Targeted), fmt.Sprint(w.Succeeded), fmt.Sprint(w.Failed),
			fmt.Sprint(w.Opened), fmt.Sprint(w.Clicked), f(w.Reach), f(w.CTR)}
		if !slices.Equal(lines[i+1], exp) {
			t.Fatalf("csv line %d: %v, want %v", i+1, lines[i+1], exp)
		}
	}

	// The breakdown by app of promo: both promo broadcasts, exact.
	var bd struct {
		NotStored []string `json:"not_stored"`
		Rows      []struct {
			Key       string `json:"key"`
			Sent      int64  `json:"sent"`
			Succeeded *int64 `json:"succeeded"`
			Opened    int64  `json:"opened"`
			Clicked   int64  `json:"clicked"`
		} `json:"rows"`
	}
	s.Do("GET", "/push/campaigns/breakdown?by=app&group=category&key=promo&from=2026-11-20&to=2026-12-05", nil, &bd)
	if len(bd.Rows) != 1 || bd.Rows[0].Sent != promo.Succeeded+promo.Failed || bd.Rows[0].Succeeded == nil || *bd.Rows[0].Succeeded != promo.Succeeded || bd.Rows[0].Opened != 34 || bd.Rows[0].Clicked != 11 || len(bd.NotStored) != 0 {
		t.Fatalf("promo by app: %+v", bd)
	}
	// By platform: a's sends to the live and dead tokens, b's and c's to
	// the live ones, each counted under its token's platform; and their
	// opens and clicks under the platform each event token carried, so
	// with a CTR (clicked ÷ succeeded).
	type platformRow struct {
		Key         string   `json:"key"`
		Broadcasts  int64    `json:"broadcasts"`
		Sent        int64    `json:"sent"`
		Succeeded   *int64   `json:"succeeded"`
		Failed      *int64   `json:"failed"`
		Opened      *int64   `json:"opened"`
		Clicked     *int64   `json:"clicked"`
		Reach       *float64 `json:"reach"`
		SuccessRate *float64 `json:"success_rate"`
		CTR         *float64 `json:"ctr"`
	}
	platformOf := s.PlatformOfTokens()
	wantPlat := map[string]*[2]int64{}
	for _, tok := range pop.Eligible() {
		p := platformOf[tok.Token]
		if wantPlat[p] == nil {
			wantPlat[p] = &[2]int64{}
		}
		if tok.Dead != "" {
			wantPlat[p][1]++
		} else {
			wantPlat[p][0] += 3
		}
	}
	wantEv := map[string]*[2]int64{}
	for _, p := range model.Platforms {
		wantEv[p] = &[2]int64{}
	}
	for _, tok := range openedBy {
		wantEv[platformOf[tok]][0]++
	}
	for _, tok := range clickedBy {
		wantEv[platformOf[tok]][1]++
	}
	var plat struct {
		Rows      []platformRow `json:"rows"`
		NotStored []string      `json:"not_stored"`
		Note      string        `json:"note"`
	}
	s.Do("GET", "/push/campaigns/breakdown?by=platform&from=2026-11-20&to=2026-12-05", nil, &plat)
	if len(plat.Rows) != 4 || !strings.Contains(plat.Note, "success rate") || slices.Contains(plat.NotStored, "opened") || !slices.Contains(plat.NotStored, "reach") {
		t.Fatalf("by platform: %+v", plat)
	}
	var opens, clicks int64
	for _, r := range plat.Rows {
		w, ev := wantPlat[r.Key], wantEv[r.Key]
		if w == nil || r.Broadcasts != 3 || r.Succeeded == nil || *r.Succeeded != w[0] || *r.Failed != w[1] || r.Sent != w[0]+w[1] ||
			r.Reach != nil || r.SuccessRate == nil || *r.SuccessRate != float64(w[0])/float64(w[0]+w[1]) {
			t.Fatalf("by platform, %q: %+v, want succeeded and failed %v", r.Key, r, w)
		}
		if r.Opened == nil || r.Clicked == nil || r.CTR == nil || *r.Opened != ev[0] || *r.Clicked != ev[1] || *r.CTR != float64(ev[1])/float64(w[0]) {
			t.Fatalf("by platform, %q: opened %v clicked %v ctr %v, want %v and ctr %v", r.Key, r.Opened, r.Clicked, r.CTR, *ev, float64(ev[1])/float64(w[0]))
		}
		opens, clicks = opens+*r.Opened, clicks+*r.Clicked
	}
	if opens != 34 || clicks != 11 {
		t.Fatalf("by platform: %d opens and %d clicks in all, want 34 and 11", opens, clicks)
	}

	for _, c := range []struct{ query, field, code string }{
		{"/push/campaigns?group=os", "group", "invalid_value"},
		{"/push/campaigns?interval=month", "interval", "invalid_value"},
		{"/push/campaigns?tz=Mars/Olympus", "tz", "invalid_value"},
		{"/push/campaigns?tz=Local", "tz", "invalid_value"},
		{"/push/campaigns?from=2026-13-01", "from", "invalid_value"},
		{"/push/campaigns?from=2026-02-01&to=2026-01-01", "to", "invalid_range"},
		{"/push/campaigns?from=2025-01-01&to=2026-02-05", "to", "invalid_range"},
		{"/push/campaigns?format=xml", "format", "invalid_value"},
		{"/push/campaigns?key=promo", "key", "invalid_value"},
		{"/push/campaigns?app=nope", "app", "unknown_app"},
		{"/push/campaigns/breakdown?by=os", "by", "invalid_value"},
		{"/push/campaigns/breakdown", "by", "invalid_value"},
		{"/push/campaigns/breakdown?by=app&key=promo", "group", "missing_value"},
		{"/push/campaigns/breakdown?by=app&interval=day", "interval", "invalid_value"},
	} {
		var e teststack.ErrorBody
		if resp := s.Do("GET", c.query, nil, &e); resp.StatusCode != http.StatusBadRequest || e.Error.Field != c.field || e.Error.Code != c.code {
			t.Errorf("%s: %d %+v, want 400 %s on %s", c.query, resp.StatusCode, e, c.code, c.field)
		}
	}
}
