package server_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/segmentgen"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
	"pushfan/segment/filter"
)

// segmentStack is a stack on the bundled tables with a plan_code column
// on users, declared as the attribute plan, and targets seeded in it.
func segmentStack(t *testing.T, targets []segmentgen.Target, configure func(c *config.Config)) *teststack.Stack {
	return teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			s.MustExec("ALTER TABLE users ADD COLUMN plan_code VARCHAR(16) NULL")
			const batch = 1000
			for lo := 0; lo < len(targets); lo += batch {
				var us, ts []string
				var uargs, targs []any
				for _, tg := range targets[lo:min(lo+batch, len(targets))] {
					if tg.TokenID%2 == 1 {
						us = append(us, "(?, ?, ?)")
						uargs = append(uargs, tg.UserID, tg.LocaleOrEmpty(), tg.Plan)
					}
					ts = append(ts, "(?, ?, ?, ?, ?, ?)")
					targs = append(targs, tg.TokenID, tg.UserID, segToken(tg.TokenID), tg.Platform, tg.AppVersion, tg.LastSeen)
				}
				s.MustExec("INSERT INTO users (id, locale, plan_code) VALUES "+strings.Join(us, ", "), uargs...)
				s.MustExec("INSERT INTO device_tokens (id, user_id, token, platform, app_version, updated_at) VALUES "+strings.Join(ts, ", "), targs...)
			}
		},
		Configure: func(c *config.Config) {
			c.Schema = model.SchemaMapping{Users: &model.UsersMapping{Attributes: map[string]model.Attribute{"plan": {Column: "plan_code", Type: "string"}}}}
			if configure != nil {
				configure(c)
			}
		},
	})
}

func segToken(id uint64) string { return fmt.Sprintf("seg-tok-%d", id) }

// saveSegment stores version version of segment name with raw as its
// filter, as the segments API does (one live row, its versions kept).
func saveSegment(s *teststack.Stack, name string, version int, raw json.RawMessage) {
	if version == 1 {
		s.MustExec("INSERT INTO segments (name, version, created_at, updated_at) VALUES (?, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", name)
	} else {
		s.MustExec("UPDATE segments SET version = ?, updated_at = UTC_TIMESTAMP(6) WHERE live_name = ?", version, name)
	}
	s.MustExec("INSERT INTO segment_versions (segment_id, version, filter, created_at) SELECT id, ?, ?, UTC_TIMESTAMP(6) FROM segments WHERE live_name = ?", version, string(raw), name)
}

// Broadcasts to segments, end to end: a three-condition segment and
// random ones (seed logged) each reach exactly the tokens filter.Match
// keeps, checked token by token against what the emulator received; the
// broadcast keeps the version and filter it was sent to, whatever the
// segment becomes; a segment in a consent category reaches its matching
// users who consented, no one else.
func TestBroadcastsToSegmentsReachExactlyTheirFilters(t *testing.T) {
	t.Parallel()
	seed := segmentgen.Seed(t, os.Getenv("SEGMENT_SEED"))
	rng := rand.New(rand.NewPCG(seed, seed))
	now := time.Now().UTC()
	targets := segmentgen.Population(rng, 2000, now)
	s := segmentStack(t, targets, func(c *config.Config) {
		c.Categories = []config.Category{{Name: "advertising", Consent: "table"}, {Name: "service"}}
		c.DefaultCategory = "service"
	})
	fields := filter.Fields{}
	for _, name := range []string{filter.FieldPlatform, filter.FieldLocale, filter.FieldAppVersion, filter.FieldLastSeen, filter.FieldUserID, "attributes.plan"} {
		kind := map[string]filter.Kind{filter.FieldAppVersion: filter.KindVersion, filter.FieldLastSeen: filter.KindTime, filter.FieldUserID: filter.KindInt}[name]
		if kind == "" {
			kind = filter.KindString
		}
		fields[name] = filter.Field{Name: name, Kind: kind}
	}
	filters := []json.RawMessage{json.RawMessage(`{"and":[{"field":"platform","op":"eq","value":"android"},` +
		`{"field":"app_version","op":"gte","value":"5.10"},{"field":"attributes.plan","op":"in","value":["pro","family"]}]}`)}
	for range 3 {
		filters = append(filters, segmentgen.Filter(rng, 3))
	}
	sent := map[uint64]int64{} // token id → messages it should have by now
	for i, raw := range filters {
		name := fmt.Sprintf("seg-%d", i)
		saveSegment(s, name, 1, raw)
		f, err := filter.Parse(raw, fields, "filter")
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want int64
		for _, tg := range targets {
			if filter.Match(f, tg.Row(), now) {
				sent[tg.TokenID]++
				want++
			}
		}
		var b teststack.Broadcast
		resp := s.Do("POST", "/push/broadcast", map[string]any{"title": name, "audience": map[string]any{"segment": name}}, &b)
		if resp.StatusCode != http.StatusOK || b.Status != "completed" || b.Targeted != want || b.Succeeded != want {
			t.Fatalf("%s %s: %d %+v, want completed with %d targeted and succeeded", name, raw, resp.StatusCode, b, want)
		}
	}
	for _, tg := range targets {
		if c := s.Emu.Counts(segToken(tg.TokenID)); c.Accepted != sent[tg.TokenID] || c.Attempts != sent[tg.TokenID] {
			t.Fatalf("token %d: %+v, want %d", tg.TokenID, c, sent[tg.TokenID])
		}
	}

	// A new version changes what the next broadcast reaches, not what an
	// earlier one was sent to.
	saveSegment(s, "seg-0", 2, json.RawMessage(`{"field":"platform","op":"eq","value":"ios"}`))
	var list struct {
		Broadcasts []struct {
			ID       uint64         `json:"id"`
			Audience model.Audience `json:"audience"`
		} `json:"broadcasts"`
	}
	s.Do("GET", "/push/broadcasts?limit=10", nil, &list)
	var first *model.Audience
	for _, b := range list.Broadcasts {
		if b.Audience.Segment != nil && b.Audience.Segment.Name == "seg-0" {
			first = &b.Audience
		}
	}
	if first == nil || first.Segment.Version != 1 || string(first.Segment.Filter) == "" || strings.Contains(string(first.Segment.Filter), "ios") {
		t.Fatalf("the first broadcast's segment: %+v, want version 1 with its own filter", first)
	}

	// In a consent category: the segment's users who consented.
	consenting := map[uint64]bool{}
	for _, tg := range targets {
		if tg.UserID%3 == 0 && !consenting[tg.UserID] {
			consenting[tg.UserID] = true
			s.MustExec("INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at) VALUES (?, 'advertising', 1, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", tg.UserID)
		}
	}
	f, _ := filter.Parse(filters[0], fields, "filter")
	var want, excluded int64
	for _, tg := range targets {
		if filter.Match(f, tg.Row(), now) {
			if consenting[tg.UserID] {
				want++
			} else {
				excluded++
			}
		}
	}
	saveSegment(s, "promo", 1, filters[0])
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "promo", "category": "advertising", "audience": map[string]any{"segment": "promo"}}, &b)
	if resp.StatusCode != http.StatusOK || b.Succeeded != want || b.Targeted != want || b.ExcludedNoConsent != excluded {
		t.Fatalf("advertising to a segment: %d %+v, want %d sent and %d left out", resp.StatusCode, b, want, excluded)
	}
	// Unknown segments and bad names are 400s naming audience.segment.
	for _, name := range []string{"nosuch", "Bad Name"} {
		var e struct{ Error struct{ Field string } }
		if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"segment": name}}, &e); resp.StatusCode != http.StatusBadRequest || e.Error.Field != "audience.segment" {
			t.Fatalf("segment %q: %d %+v, want a 400 naming audience.segment", name, resp.StatusCode, e)
		}
	}
}
