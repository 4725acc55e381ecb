package consent_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"pushfan/consent"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

// categories are a deployment's: two read from the bundled table, one
// from the app's own users table, one needing no consent.
var categories = []model.Category{
	{Name: "advertising", Consent: model.ConsentTable, Night: &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}, Consent: model.ConsentTable}},
	{Name: "service"},
	{Name: "partner", Consent: "u.partner_agree = 1"},
	{Name: "digest", Consent: model.ConsentTable},
}

// clock is a test's settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)} }
func (c *clock) at() time.Time       { return c.t.Truncate(time.Microsecond) }

func newBook(t *testing.T) (*consent.Book, *sql.DB, *clock) {
	t.Helper()
	tdb := testdb.New(t)
	b := consent.New(tdb.SQL.DB, categories, 10*time.Second, nil)
	c := newClock()
	b.SetNow(c.now)
	return b, tdb.SQL.DB, c
}

func wantField(t *testing.T, err error, field, code string) {
	t.Helper()
	var fe *consent.FieldError
	if !errors.As(err, &fe) || fe.Field != field || fe.Code != code || fe.Message == "" {
		t.Fatalf("got %v; want a refusal of %s with code %s", err, field, code)
	}
}

// A Set writes the current row and its proof together, and a history
// that cannot be written leaves the row as it was: one transaction.
func TestSetWritesTheConsentAndItsHistoryInOneTransaction(t *testing.T) {
	b, db, clk := newBook(t)
	ctx := context.Background()
	c, err := b.Set(ctx, 42, "advertising", consent.Answer{Granted: true, Night: true, Source: "signup", Actor: "ci", RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Consent{UserID: 42, Category: "advertising", Granted: true, Night: true, Source: "signup", Updated: clk.at(), Changed: clk.at()}
	if c != want {
		t.Fatalf("Set answered %+v; want %+v", c, want)
	}
	var granted, night bool
	var source string
	var updated, changed time.Time
	if err := db.QueryRow(`SELECT granted, night, source, updated_at, changed_at FROM user_consents WHERE user_id = 42 AND category = 'advertising'`).
		Scan(&granted, &night, &source, &updated, &changed); err != nil {
		t.Fatal(err)
	}
	if !granted || !night || source != "signup" || !updated.Equal(clk.at()) || !changed.Equal(clk.at()) {
		t.Fatalf("row: granted %v night %v source %q updated %v changed %v", granted, night, source, updated, changed)
	}
	var actor, reqID string
	var at time.Time
	if err := db.QueryRow(`SELECT actor, request_id, at FROM user_consent_history WHERE user_id = 42 AND category = 'advertising'`).Scan(&actor, &reqID, &at); err != nil {
		t.Fatal(err)
	}
	if actor != "ci" || reqID != "req-1" || !at.Equal(clk.at()) {
		t.Fatalf("history: actor %q request %q at %v", actor, reqID, at)
	}

	// Without its history table the answer is refused whole.
	if _, err := db.Exec(`RENAME TABLE user_consent_history TO user_consent_history_away`); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Hour)
	if _, err := b.Set(ctx, 42, "advertising", consent.Answer{Granted: false}); err == nil {
		t.Fatal("Set succeeded without a history to append to")
	}
	if _, err := b.Set(ctx, 43, "advertising", consent.Answer{Granted: true}); err == nil {
		t.Fatal("Set succeeded without a history to append to")
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM user_consents WHERE user_id = 43 OR (user_id = 42 AND granted = 1 AND updated_at = ?)`, want.Updated).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d rows; want user 42's first answer only, unchanged, and no row for 43", n)
	}
}

// Every answer restarts the two years (updated_at); changed_at moves only
// when granted or night does.
func TestUpdatedOnEveryAnswerChangedOnlyOnAChange(t *testing.T) {
	b, _, clk := newBook(t)
	ctx := context.Background()
	first, err := b.Set(ctx, 7, "advertising", consent.Answer{Granted: true, Source: "signup"})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(400 * 24 * time.Hour)
	again, err := b.Set(ctx, 7, "advertising", consent.Answer{Granted: true, Source: "reconfirm"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Updated.Equal(clk.at()) || !again.Changed.Equal(first.Changed) || again.Source != "reconfirm" {
		t.Fatalf("the same answer again: %+v; want updated now, changed %v", again, first.Changed)
	}
	clk.add(time.Minute)
	night, err := b.Set(ctx, 7, "advertising", consent.Answer{Granted: true, Night: true})
	if err != nil {
		t.Fatal(err)
	}
	if !night.Updated.Equal(clk.at()) || !night.Changed.Equal(clk.at()) {
		t.Fatalf("night given: %+v; want updated and changed now", night)
	}
	clk.add(time.Minute)
	off, err := b.Set(ctx, 7, "advertising", consent.Answer{Granted: false})
	if err != nil {
		t.Fatal(err)
	}
	if !off.Changed.Equal(clk.at()) {
		t.Fatalf("withdrawn: %+v; want changed now", off)
	}
	got, err := b.Get(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != off {
		t.Fatalf("Get: %+v; want %+v first", got, off)
	}
}

// Answers the table cannot hold, or for a category it does not keep, are
// refused naming the field, and nothing is written.
func TestSetRefusals(t *testing.T) {
	b, db, _ := newBook(t)
	ctx := context.Background()
	for _, c := range []struct {
		category    string
		a           consent.Answer
		field, code string
	}{
		{"advertising", consent.Answer{Night: true}, "night", "night_without_consent"},
		{"advertising", consent.Answer{Granted: true, Source: strings.Repeat("가", consent.MaxSource+1)}, "source", "too_long"},
		{"nope", consent.Answer{Granted: true}, "category", "unknown_category"},
		{"service", consent.Answer{Granted: true}, "category", "no_consent_table"},
		{"partner", consent.Answer{Granted: true}, "category", "no_consent_table"},
	} {
		_, err := b.Set(ctx, 1, c.category, c.a)
		wantField(t, err, c.field, c.code)
	}
	if _, err := b.Set(ctx, 1, "advertising", consent.Answer{Granted: true, Source: strings.Repeat("가", consent.MaxSource)}); err != nil {
		t.Fatalf("a source of %d characters: %v", consent.MaxSource, err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM user_consent_history`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d history rows (%v); want the one accepted answer", n, err)
	}
	none := consent.New(db, nil, time.Second, nil)
	_, err := none.Set(ctx, 1, "advertising", consent.Answer{Granted: true})
	wantField(t, err, "category", "unknown_category")
}

// Get answers every table category in configuration order, those never
// answered as not granted with no times.
func TestGetAnswersEveryTableCategory(t *testing.T) {
	b, _, _ := newBook(t)
	ctx := context.Background()
	if _, err := b.Set(ctx, 5, "digest", consent.Answer{Granted: true, Source: "settings"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Category != "advertising" || got[0].Granted || !got[0].Updated.IsZero() || got[0].UserID != 5 ||
		got[1].Category != "digest" || !got[1].Granted || got[1].Source != "settings" || got[1].Updated.IsZero() {
		t.Fatalf("Get: %+v", got)
	}
	got, err = b.Get(ctx, 6)
	if err != nil || len(got) != 2 || got[0].Granted || got[1].Granted {
		t.Fatalf("Get of a user with no answers: %+v, %v", got, err)
	}
}

// History is newest first, limited, and per category.
func TestHistoryNewestFirst(t *testing.T) {
	b, _, clk := newBook(t)
	ctx := context.Background()
	answers := []consent.Answer{
		{Granted: true, Source: "signup", Actor: "ci", RequestID: "r1"},
		{Granted: true, Night: true, Source: "settings", Actor: "ci", RequestID: "r2"},
		{Granted: false, Source: "settings", Actor: "crm", RequestID: "r3"},
		{Granted: true, Source: "campaign", Actor: "crm", RequestID: "r4"},
	}
	for _, a := range answers {
		if _, err := b.Set(ctx, 9, "advertising", a); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Set(ctx, 9, "digest", consent.Answer{Granted: true}); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Second)
	}
	h, err := b.History(ctx, 9, "advertising", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 {
		t.Fatalf("%d records; want 3", len(h))
	}
	for i, r := range h {
		a := answers[len(answers)-1-i]
		if r.Granted != a.Granted || r.Night != a.Night || r.Source != a.Source || r.Actor != a.Actor || r.RequestID != a.RequestID {
			t.Fatalf("record %d: %+v; want %+v", i, r, a)
		}
		if i > 0 && !r.At.Before(h[i-1].At) {
			t.Fatalf("record %d at %v is not older than the one before (%v)", i, r.At, h[i-1].At)
		}
	}
	if h, err := b.History(ctx, 10, "advertising", 10); err != nil || h == nil || len(h) != 0 {
		t.Fatalf("no history: %v, %v; want an empty list", h, err)
	}
	_, err = b.History(ctx, 9, "service", 10)
	wantField(t, err, "category", "no_consent_table")
}
