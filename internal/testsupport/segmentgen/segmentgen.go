// Package segmentgen makes random populations and random segment filters
// for property tests (issue 42): a filter's targets in the database must
// be exactly the seeded rows filter.Match keeps. Everything comes from one
// seeded *rand.Rand, so a failing seed replays.
package segmentgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"pushfan/segment/filter"
)

// Target is one seeded token and its user's columns; a nil pointer is NULL
// (but a locale, which the bundled users table keeps as ” for none).
type Target struct {
	TokenID, UserID uint64
	Platform        *string
	AppVersion      *string
	Locale          *string
	Plan            *string
	LastSeen        time.Time
}

var (
	platforms = []string{"android", "ios", "web"}
	locales   = []string{"en", "ko", "ja", "pt-BR"}
	plans     = []string{"free", "pro", "family"}
	versions  = []string{"5.9.2", "5.9.10", "5.10.0", "5.10", "6.0.1", "4.2", "10.0.0"}
)

func pick(rng *rand.Rand, from []string, nullOneIn int) *string {
	if rng.IntN(nullOneIn) == 0 {
		return nil
	}
	s := from[rng.IntN(len(from))]
	return &s
}

// Population is n tokens, two for each user, with random columns: a few
// NULLs in each, last_seen spread over the 60 days before now (never
// within a minute of a 1-, 7- or 30-day boundary, so that the database's
// clock and the test's agree on every within).
func Population(rng *rand.Rand, n int, now time.Time) []Target {
	out := make([]Target, n)
	users := map[uint64]Target{}
	for i := range out {
		uid := uint64(i/2 + 1)
		u, ok := users[uid]
		if !ok {
			u = Target{UserID: uid, Locale: pick(rng, locales, 8), Plan: pick(rng, plans, 5)}
			users[uid] = u
		}
		age := time.Duration(rng.Int64N(int64(60 * 24 * time.Hour)))
		for _, b := range []time.Duration{24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour} {
			if d := age - b; d > -2*time.Minute && d < 2*time.Minute {
				age += 5 * time.Minute
			}
		}
		out[i] = Target{TokenID: uint64(i + 1), UserID: uid, Locale: u.Locale, Plan: u.Plan,
			Platform: pick(rng, platforms, 10), AppVersion: pick(rng, versions, 6), LastSeen: now.Add(-age).Truncate(time.Microsecond)}
	}
	return out
}

// Row is t as filter.Match reads it.
func (t Target) Row() filter.Row {
	r := filter.Row{filter.FieldUserID: int64(t.UserID), filter.FieldLastSeen: t.LastSeen}
	for k, v := range map[string]*string{filter.FieldPlatform: t.Platform, filter.FieldAppVersion: t.AppVersion,
		filter.AttributePrefix + "plan": t.Plan} {
		if v != nil {
			r[k] = *v
		}
	}
	r[filter.FieldLocale] = t.LocaleOrEmpty()
	return r
}

// LocaleOrEmpty is the locale as the bundled users table keeps it.
func (t Target) LocaleOrEmpty() string {
	if t.Locale == nil {
		return ""
	}
	return *t.Locale
}

// Filter is a random filter over the population's fields, nested up to
// depth deep, as JSON.
func Filter(rng *rand.Rand, depth int) json.RawMessage {
	raw, _ := json.Marshal(node(rng, depth))
	return raw
}

func node(rng *rand.Rand, depth int) any {
	if depth <= 1 || rng.IntN(3) == 0 {
		return condition(rng)
	}
	switch rng.IntN(3) {
	case 0:
		return map[string]any{"not": node(rng, depth-1)}
	case 1:
		return map[string]any{"and": children(rng, depth)}
	}
	return map[string]any{"or": children(rng, depth)}
}

func children(rng *rand.Rand, depth int) []any {
	out := make([]any, 2+rng.IntN(2))
	for i := range out {
		out[i] = node(rng, depth-1)
	}
	return out
}

func condition(rng *rand.Rand) any {
	c := func(field, op string, value any) any { return map[string]any{"field": field, "op": op, "value": value} }
	strOps := []string{"eq", "ne", "in", "nin", "exists"}
	str := func(field string, from []string) any {
		op := strOps[rng.IntN(len(strOps))]
		switch op {
		case "in", "nin":
			return c(field, op, []string{from[rng.IntN(len(from))], from[rng.IntN(len(from))]})
		case "exists":
			return c(field, op, rng.IntN(2) == 0)
		}
		return c(field, op, from[rng.IntN(len(from))])
	}
	switch rng.IntN(6) {
	case 0:
		return str(filter.FieldPlatform, platforms)
	case 1:
		return str(filter.FieldLocale, locales)
	case 2:
		return str(filter.AttributePrefix+"plan", plans)
	case 3:
		ops := []string{"eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"}
		op := ops[rng.IntN(len(ops))]
		switch op {
		case "in":
			return c(filter.FieldAppVersion, op, []string{versions[rng.IntN(len(versions))], versions[rng.IntN(len(versions))]})
		case "exists":
			return c(filter.FieldAppVersion, op, rng.IntN(2) == 0)
		}
		return c(filter.FieldAppVersion, op, versions[rng.IntN(len(versions))])
	case 4:
		ops := []string{"within", "not_within"}
		return c(filter.FieldLastSeen, ops[rng.IntN(2)], []string{"1d", "7d", "30d"}[rng.IntN(3)])
	}
	ops := []string{"lt", "gte", "in", "ne"}
	op := ops[rng.IntN(len(ops))]
	if op == "in" {
		return c(filter.FieldUserID, op, []int{rng.IntN(100) + 1, rng.IntN(100) + 1})
	}
	return c(filter.FieldUserID, op, rng.IntN(30000)+1)
}

// Seed is the seed a property test runs with: fixed by name, or new,
// and said in the log so a failure replays.
func Seed(tb interface{ Logf(string, ...any) }, env string) uint64 {
	s := uint64(time.Now().UnixNano())
	if env != "" {
		fmt.Sscan(env, &s)
	}
	tb.Logf("segment property seed %d (set SEGMENT_SEED=%d to replay)", s, s)
	return s
}
