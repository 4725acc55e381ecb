package repository_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

// seedFieldValues stores six users and their tokens, with a plan_code
// (string) and a beta (bool) column on users declared as attributes, and
// returns the Store reading them through that declaration. User 5 has
// push off and user 6 only an invalidated token: neither's values (the
// locales zz and fr, 5's plan gold) are counted.
func seedFieldValues(t *testing.T, s *repository.Store) *repository.Store {
	t.Helper()
	exec(t, s, "ALTER TABLE users ADD COLUMN plan_code VARCHAR(16) NULL, ADD COLUMN beta TINYINT NULL")
	exec(t, s, `INSERT INTO users (id, locale, timezone, push_enabled, plan_code, beta) VALUES
		(1, 'en', 'Europe/Berlin', 1, 'pro', 1),
		(2, 'en', NULL, 1, 'pro', 0),
		(3, 'de', 'Europe/Berlin', 1, 'free', NULL),
		(4, 'pt-BR', 'America/Sao_Paulo', 1, '', 5),
		(5, 'zz', 'Asia/Tokyo', 0, 'gold', 1),
		(6, 'fr', 'Europe/Paris', 1, 'gold', 1)`)
	exec(t, s, `INSERT INTO device_tokens (user_id, token, platform, app_version, invalidated_at) VALUES
		(1, 'v-1a', 'android', '5.10.0', NULL),
		(1, 'v-1b', 'ios', '5.9', NULL),
		(2, 'v-2a', 'android', '5.10.0', NULL),
		(3, 'v-3a', 'ios', '', NULL),
		(3, 'v-3b', 'web', NULL, NULL),
		(4, 'v-4a', 'android', NULL, NULL),
		(4, 'v-4b', NULL, NULL, NULL),
		(4, 'v-4c', 'ios', '7.0', UTC_TIMESTAMP(6)),
		(5, 'v-5a', 'android', '6.0', NULL),
		(5, 'v-5b', 'web', '6.0', NULL),
		(6, 'v-6a', 'web', '6.0', UTC_TIMESTAMP(6))`)
	sc, err := repository.CompileSchema(model.SchemaMapping{Users: &model.UsersMapping{Attributes: map[string]model.Attribute{
		"plan": {Column: "plan_code", Type: "string"},
		"beta": {Column: "beta", Type: "bool"},
		"born": {Column: "id", Type: "int"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return s.WithSchema(sc)
}

func valuesString(vs []repository.FieldValue) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s:%d", v.Value, v.Tokens)
	}
	return out
}

// Each field's values are those of the valid tokens of push-enabled
// users, the most common first (ties by value), with their tokens'
// counts; absent values (NULL, the empty string) are none; a bool reads true and false
// (5 is true); limit keeps the first.
func TestSegmentFieldValuesCountTheAudience(t *testing.T) {
	s := seedFieldValues(t, newStore(t))
	for _, c := range []struct {
		field string
		limit int
		want  string
	}{
		{"platform", 50, "android:3 ios:2 web:1"},
		{"platform", 2, "android:3 ios:2"},
		{"locale", 50, "en:3 de:2 pt-BR:2"},
		{"timezone", 50, "Europe/Berlin:4 America/Sao_Paulo:2"},
		{"app", 50, "default:7"},
		{"app_version", 50, "5.10.0:2 5.9:1"},
		{"attributes.plan", 50, "pro:3 free:2"},
		{"attributes.beta", 50, "true:4 false:1"},
	} {
		vs, sampled, err := s.SegmentFieldValues(ctx(t), c.field, c.limit)
		if err != nil || sampled || vs == nil {
			t.Fatalf("%s: %v, sampled %v, %v", c.field, vs, sampled, err)
		}
		if got := valuesString(vs); got != c.want {
			t.Errorf("%s (limit %d): %q, want %q", c.field, c.limit, got, c.want)
		}
	}
	for _, field := range []string{"user_id", "last_seen", "attributes.born", "attributes.nope", "nope", "", "t.platform"} {
		if vs, _, err := s.SegmentFieldValues(ctx(t), field, 50); !errors.Is(err, repository.ErrNoFieldValues) {
			t.Errorf("%q: %v, %v; want ErrNoFieldValues", field, vs, err)
		}
	}
}

// Users with sparse ids (one in 1,000) are read through the tokens' ids:
// a table that small is still read whole, and exactly.
func TestSegmentFieldValuesOfSparseUserIDs(t *testing.T) {
	s := newStore(t)
	const n = 3000
	seedSegmentTargetsAt(t, s, n, 1000)
	vs, sampled, err := s.SegmentFieldValues(ctx(t), "platform", 50)
	if err != nil || sampled {
		t.Fatalf("%v, sampled %v, %v", vs, sampled, err)
	}
	android, ios := platformTruth(n)
	if got, want := valuesString(vs), fmt.Sprintf("ios:%d android:%d", ios, android); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// On a users table bigger than the sample (120,000 ids), the values come
// from the sample, their counts scaled within 1 % of the users.
func TestSegmentFieldValuesSampleABigTable(t *testing.T) {
	s := newStore(t)
	const n = 120_000
	seedSegmentTargets(t, s, n)
	began := time.Now()
	vs, sampled, err := s.SegmentFieldValues(ctx(t), "platform", 50)
	took := time.Since(began)
	if err != nil || !sampled || len(vs) != 2 || vs[0].Value != "ios" || vs[1].Value != "android" {
		t.Fatalf("%v, sampled %v, %v", vs, sampled, err)
	}
	android, ios := platformTruth(n)
	t.Logf("sampled ios %d, android %d in %v; exact %d, %d", vs[0].Tokens, vs[1].Tokens, took, ios, android)
	tol := int64(n / 100)
	for _, c := range []struct{ got, want int64 }{{vs[0].Tokens, ios}, {vs[1].Tokens, android}} {
		if d := c.got - c.want; d > tol || d < -tol {
			t.Errorf("sampled %d, exact %d: off by %d, more than %d", c.got, c.want, d, tol)
		}
	}
}

// platformTruth counts seedSegmentTargets' valid tokens of push-enabled
// users by platform.
func platformTruth(n int) (android, ios int64) {
	for u := 1; u <= n; u++ {
		if u%97 == 0 {
			continue
		}
		if u%101 != 0 {
			if u%2 == 0 {
				android++
			} else {
				ios++
			}
		}
		if u%5 == 0 {
			ios++
		}
	}
	return android, ios
}
