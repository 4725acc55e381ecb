package repository_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/segmentgen"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/segment/filter"
)

// seedSegmentPopulation stores targets in the bundled tables, with a
// plan_code column on users declared as the attribute plan, and returns
// the Store reading them through that declaration.
func seedSegmentPopulation(t *testing.T, s *repository.Store, targets []segmentgen.Target) *repository.Store {
	t.Helper()
	exec(t, s, "ALTER TABLE users ADD COLUMN plan_code VARCHAR(16) NULL")
	const batch = 5000
	for lo := 0; lo < len(targets); lo += batch {
		var us, ts []string
		var uargs, targs []any
		for _, tg := range targets[lo:min(lo+batch, len(targets))] {
			if tg.TokenID%2 == 1 { // the user's first token
				us = append(us, "(?, ?, ?)")
				uargs = append(uargs, tg.UserID, tg.LocaleOrEmpty(), tg.Plan)
			}
			ts = append(ts, "(?, ?, ?, ?, ?, ?)")
			targs = append(targs, tg.TokenID, tg.UserID, fmt.Sprintf("seg-%d", tg.TokenID), tg.Platform, tg.AppVersion, tg.LastSeen)
		}
		exec(t, s, "INSERT INTO users (id, locale, plan_code) VALUES "+strings.Join(us, ", "), uargs...)
		exec(t, s, "INSERT INTO device_tokens (id, user_id, token, platform, app_version, updated_at) VALUES "+strings.Join(ts, ", "), targs...)
	}
	sc, err := repository.CompileSchema(model.SchemaMapping{Users: &model.UsersMapping{
		Attributes: map[string]model.Attribute{"plan": {Column: "plan_code", Type: "string"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s.WithSchema(sc)
}

// Property: on 50,000 random tokens, each of 20 random filters (nested
// up to 3 deep, over platform, locale, the plan attribute, app_version,
// last_seen and user_id) selects in the database, page by page as a
// send reads it and in one count, exactly the tokens filter.Match keeps
// in Go. The seed is in the log; SEGMENT_SEED replays one.
func TestASegmentSelectsExactlyWhatItsFilterMatches(t *testing.T) {
	t.Parallel()
	seed := segmentgen.Seed(t, os.Getenv("SEGMENT_SEED"))
	rng := rand.New(rand.NewPCG(seed, seed))
	now := time.Now().UTC()
	targets := segmentgen.Population(rng, 50_000, now)
	s := seedSegmentPopulation(t, newStore(t), targets)
	fields := s.Schema().SegmentFields()
	nonEmpty := 0
	filters := make([]json.RawMessage, 0, 28)
	for range 20 {
		filters = append(filters, segmentgen.Filter(rng, 3))
	}
	// And every negated presence, which a random seed may miss: a NULL is
	// absent, so "not absent" must not let NULLs through.
	for _, field := range []string{"attributes.plan", "locale", "app_version", "last_seen"} {
		for _, v := range []string{"true", "false"} {
			filters = append(filters, json.RawMessage(`{"not":{"field":"`+field+`","op":"exists","value":`+v+`}}`))
		}
	}
	for i, raw := range filters {
		f, err := filter.Parse(raw, fields, "filter")
		if err != nil {
			t.Fatalf("filter %d %s: %v", i, raw, err)
		}
		var want []uint64
		for _, tg := range targets {
			if filter.Match(f, tg.Row(), now) {
				want = append(want, tg.TokenID)
			}
		}
		a := model.Audience{Segment: &model.SegmentRef{Name: fmt.Sprintf("s%d", i), Version: 1, Filter: raw}}
		var got []uint64
		for after := uint64(0); ; {
			page, err := s.AudiencePage(ctx(t), a, after, math.MaxUint64, 1000, nil)
			if err != nil {
				t.Fatalf("filter %d %s: %v", i, raw, err)
			}
			got = append(got, targetIDs(page)...)
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].TokenID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("filter %d %s: the database selects %d tokens, Go %d (first difference at %s)", i, raw, len(got), len(want), firstDifference(got, want))
		}
		if n, err := s.CountAudience(ctx(t), a); err != nil || n != int64(len(want)) {
			t.Fatalf("filter %d %s: count %d (%v), want %d", i, raw, n, err, len(want))
		}
		if len(want) > 0 && len(want) < len(targets) {
			nonEmpty++
		}
	}
	if nonEmpty < 5 {
		t.Fatalf("only %d of %d filters selected some but not all tokens: the property says little", nonEmpty, len(filters))
	}
}

func firstDifference(a, b []uint64) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("index %d: %d vs %d", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("index %d", min(len(a), len(b)))
}

// Injection: a value with quotes and comments in every value position, a
// field named like a column or like SQL, and a 10,000-value in: each is
// a clean *filter.Error (a 400) or a correct result, never an error from
// the database.
func TestASegmentFilterCannotInjectSQL(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	targets := segmentgen.Population(rand.New(rand.NewPCG(1, 2)), 200, now)
	s := seedSegmentPopulation(t, newStore(t), targets)
	fields := s.Schema().SegmentFields()
	evil := []string{`' OR 1=1 -- `, `"; DROP TABLE users; #`, `\' OR \'1\'=\'1`, "*/ OR /*", "`id`", "ko' UNION SELECT token FROM device_tokens -- "}
	var filters []string
	for _, v := range evil {
		q, _ := json.Marshal(v)
		for _, field := range []string{"platform", "locale", "attributes.plan"} {
			filters = append(filters, `{"field":"`+field+`","op":"eq","value":`+string(q)+`}`,
				`{"field":"`+field+`","op":"in","value":["android",`+string(q)+`]}`,
				`{"not":{"field":"`+field+`","op":"ne","value":`+string(q)+`}}`)
		}
	}
	for _, raw := range filters {
		f, err := filter.Parse([]byte(raw), fields, "filter")
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want int64
		for _, tg := range targets {
			if filter.Match(f, tg.Row(), now) {
				want++
			}
		}
		n, err := s.CountAudience(ctx(t), model.Audience{Segment: &model.SegmentRef{Name: "x", Version: 1, Filter: []byte(raw)}})
		if err != nil || n != want {
			t.Fatalf("%s: %d (%v), want %d", raw, n, err, want)
		}
	}
	// An order comparison runs too (its result follows the column's
	// collation, which Go's byte order does not model).
	for _, v := range evil {
		q, _ := json.Marshal(v)
		raw := `{"or":[{"field":"platform","op":"gt","value":` + string(q) + `},{"field":"attributes.plan","op":"lte","value":` + string(q) + `}]}`
		if _, err := s.CountAudience(ctx(t), model.Audience{Segment: &model.SegmentRef{Name: "x", Version: 1, Filter: []byte(raw)}}); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	for _, raw := range []string{
		`{"field":"t.token","op":"eq","value":"x"}`,
		`{"field":"platform; DROP TABLE users","op":"eq","value":"x"}`,
		`{"field":"u.id","op":"eq","value":1}`,
		`{"field":"attributes.plan_code","op":"eq","value":"x"}`,
		`{"field":"platform","op":"eq) OR (1","value":"x"}`,
		`{"field":"user_id","op":"in","value":[` + strings.Join(many, ",") + `]}`,
	} {
		if _, err := filter.Parse([]byte(raw), fields, "filter"); err == nil {
			t.Fatalf("%.60s: parsed", raw)
		}
		_, err := s.CountAudience(ctx(t), model.Audience{Segment: &model.SegmentRef{Name: "x", Version: 1, Filter: []byte(raw)}})
		var fe *filter.Error
		if !errors.As(err, &fe) {
			t.Fatalf("%.60s: %v, want the filter's own error before any SQL", raw, err)
		}
	}
}
