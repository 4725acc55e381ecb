package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/segment"
)

func ptr(s string) *string { return &s }

func TestCatalogRefusesNamingTheField(t *testing.T) {
	c := segment.New(testdb.New(t).Store, segment.Options{})
	ctx := t.Context()
	ok := json.RawMessage(`{"field":"platform","op":"eq","value":"ios"}`)
	cases := []struct {
		name  string
		w     segment.Write
		field string
	}{
		{"no name", segment.Write{Filter: ok}, "name"},
		{"upper-case name", segment.Write{Name: "Android", Filter: ok}, "name"},
		{"long name", segment.Write{Name: "a" + strings.Repeat("b", 64), Filter: ok}, "name"},
		{"long description", segment.Write{Name: "a", Description: ptr(strings.Repeat("é", 513)), Filter: ok}, "description"},
		{"no filter", segment.Write{Name: "a"}, "filter"},
		{"bad op", segment.Write{Name: "a", Filter: json.RawMessage(`{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"locale","op":"eq","value":"de"},{"field":"platform","op":"within","value":"1d"}]}`)}, "filter.and[2].op"},
		{"unknown field", segment.Write{Name: "a", Filter: json.RawMessage(`{"not":{"field":"attributes.plan","op":"eq","value":"pro"}}`)}, "filter.not.field"},
		{"bad value", segment.Write{Name: "a", Filter: json.RawMessage(`{"field":"app_version","op":"gt","value":"five"}`)}, "filter.value"},
	}
	for _, tc := range cases {
		_, err := c.Create(ctx, tc.w)
		var fe *segment.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v, want a field error at %s", tc.name, err, tc.field)
		}
	}
	if _, err := c.Get(ctx, "nobody"); !errors.Is(err, segment.ErrNotFound) {
		t.Errorf("get nobody: %v, want ErrNotFound", err)
	}
	if _, err := c.Version(ctx, "nobody", 0); err == nil {
		t.Errorf("version 0: no error")
	}
	if _, err := c.Create(ctx, segment.Write{Name: "ios", Filter: json.RawMessage(" {\"field\": \"platform\",\n \"op\": \"eq\", \"value\": \"ios\"} ")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, segment.Write{Name: "ios", Filter: ok}); !errors.Is(err, segment.ErrExists) {
		t.Errorf("a second ios: %v, want ErrExists", err)
	}
	ref, err := c.Current(ctx, "ios")
	if err != nil || ref.Version != 1 || string(ref.Filter) != string(ok) {
		t.Errorf("current: %+v (%s), %v; want the filter compacted", ref, ref.Filter, err)
	}
}

func TestPreviewEstimatesABigTableThenCountsExactly(t *testing.T) {
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, q := range []string{
		"INSERT INTO users (id, locale) SELECT seq, IF(seq % 4 = 0, 'de', 'en') FROM seq_1_to_5000",
		"INSERT INTO device_tokens (user_id, token, platform) SELECT seq, CONCAT('t', seq), IF(seq % 2 = 0, 'ios', 'android') FROM seq_1_to_5000",
	} {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	f := json.RawMessage(`{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"locale","op":"ne","value":"de"}]}`)
	small := segment.New(db.Store, segment.Options{Sample: 3})
	p, err := small.Preview(ctx, f, false)
	if err != nil || !p.Exact || p.Tokens != 1250 || p.Users != 1250 || len(p.Sample) != 3 {
		t.Fatalf("small table: %+v, %v; want exact 1250", p, err)
	}
	big := segment.New(db.Store, segment.Options{SmallTable: 1000})
	p, err = big.Preview(ctx, f, false)
	if err != nil || p.Exact || p.Tokens != 1250 {
		// 5,000 users are fewer than the estimate's sample: it reads them all.
		t.Fatalf("big table: %+v, %v; want the estimate, not exact", p, err)
	}
	p, err = big.Preview(ctx, f, true)
	if err != nil || !p.Exact || p.Tokens != 1250 {
		t.Fatalf("exact asked: %+v, %v", p, err)
	}
	_, err = big.Preview(ctx, json.RawMessage(`{"or":[]}`), true)
	var fe *segment.FieldError
	if !errors.As(err, &fe) || fe.Field != "filter.or" {
		t.Fatalf("empty or: %v", err)
	}
}
