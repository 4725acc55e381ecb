package consent_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/consent"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

// dueRows stores 2,000 consents whose updated_at spans the cutoff (three
// users to a microsecond, so pages break inside ties), a seventh of them
// withdrawn, over the table categories and one that is not: the consents
// due, in Due's order.
func dueRows(t *testing.T, db *sql.DB, cutoff time.Time) []model.Consent {
	t.Helper()
	cats := []string{"advertising", "digest", "advertising", "partner", "advertising"}
	var due []model.Consent
	var vals []string
	var args []any
	for i := range 2000 {
		c := model.Consent{UserID: uint64(5000 - i), Category: cats[i%len(cats)], Granted: i%7 != 0, Source: "seed",
			Updated: cutoff.Add(time.Duration(i/3-333) * time.Minute)}
		switch i {
		case 1000: // exactly at the cutoff: not due yet
			c.Updated, c.Category, c.Granted = cutoff, "advertising", true
		case 1001: // a microsecond before: due
			c.Updated, c.Category, c.Granted = cutoff.Add(-time.Microsecond), "advertising", true
		}
		c.Changed = c.Updated.Add(-time.Hour)
		vals = append(vals, "(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, c.UserID, c.Category, c.Granted, false, c.Updated, c.Changed, c.Source)
		if c.Granted && c.Updated.Before(cutoff) && c.Category != "partner" {
			due = append(due, c)
		}
	}
	if _, err := db.Exec(`INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source) VALUES `+strings.Join(vals, ","), args...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE TABLE user_consents`); err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{"advertising": 0, "digest": 1}
	slices.SortFunc(due, func(a, b model.Consent) int {
		if d := rank[a.Category] - rank[b.Category]; d != 0 {
			return d
		}
		if d := a.Updated.Compare(b.Updated); d != 0 {
			return d
		}
		return int(a.UserID) - int(b.UserID)
	})
	return due
}

// walk pages Due to the end, checking no page is longer than limit and
// only the last has no cursor.
func walk(t *testing.T, b *consent.Book, category string, cutoff time.Time, limit int) []model.Consent {
	t.Helper()
	var all []model.Consent
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the walk does not end")
		}
		p, err := b.Due(context.Background(), category, cutoff, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Consents) > limit || (p.Next != "" && len(p.Consents) != limit) || (p.Next == "" && pages > 0 && len(p.Consents) == 0) {
			t.Fatalf("page %d: %d consents, next %q (limit %d)", pages, len(p.Consents), p.Next, limit)
		}
		all = append(all, p.Consents...)
		if p.Next == "" {
			return all
		}
		after = p.Next
	}
}

// Due pages exactly the granted consents before the cutoff: none
// missed, none twice, none withdrawn, none of a category not kept in the
// table, in the walk's order, whatever the page size.
func TestDuePagesExactlyTheConsentsBeforeTheCutoff(t *testing.T) {
	b, db, _ := newBook(t)
	cutoff := consent.Cutoff(time.Date(2026, 12, 5, 9, 0, 0, 123456789, time.UTC))
	if !cutoff.Equal(time.Date(2024, 12, 5, 9, 0, 0, 123456000, time.UTC)) {
		t.Fatalf("cutoff %v; want two years before, to the microsecond", cutoff)
	}
	want := dueRows(t, db, cutoff)
	byCat := func(cat string) []model.Consent {
		return slices.DeleteFunc(slices.Clone(want), func(c model.Consent) bool { return c.Category != cat })
	}
	for _, c := range []struct {
		category string
		limit    int
		want     []model.Consent
	}{
		{"", 37, want},
		{"", 1, want},
		{"", len(want), want},
		{"", 5000, want},
		{"advertising", 50, byCat("advertising")},
		{"digest", len(byCat("digest")), byCat("digest")},
	} {
		got := walk(t, b, c.category, cutoff, c.limit)
		if len(got) != len(c.want) {
			t.Fatalf("category %q, limit %d: %d consents; want %d", c.category, c.limit, len(got), len(c.want))
		}
		for i := range got {
			if got[i].UserID != c.want[i].UserID || got[i].Category != c.want[i].Category || !got[i].Updated.Equal(c.want[i].Updated) ||
				!got[i].Changed.Equal(c.want[i].Changed) || !got[i].Granted || got[i].Source != "seed" {
				t.Fatalf("category %q, limit %d: consent %d is %+v; want %+v", c.category, c.limit, i, got[i], c.want[i])
			}
		}
	}
	if len(want) < 500 || want[0].Category != "advertising" || want[len(want)-1].Category != "digest" {
		t.Fatalf("the fixture is too thin: %d due", len(want))
	}
}

// A cursor this API did not return, or one of another category than the
// one asked for, is refused naming after.
func TestDueRefusesForeignCursors(t *testing.T) {
	b, db, _ := newBook(t)
	cutoff := consent.Cutoff(time.Now())
	dueRows(t, db, cutoff)
	p, err := b.Due(context.Background(), "", cutoff, "", 1)
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	for _, after := range []string{"nonsense!", "bm9uc2Vuc2U", p.Next + "x"} {
		_, err := b.Due(context.Background(), "", cutoff, after, 10)
		wantField(t, err, "after", "invalid_cursor")
	}
	_, err = b.Due(context.Background(), "digest", cutoff, p.Next, 10)
	wantField(t, err, "after", "invalid_cursor")
	_, err = b.Due(context.Background(), "partner", cutoff, "", 10)
	wantField(t, err, "category", "no_consent_table")
}

// Each category's read is a range of idx_user_consents_due in its order,
// first page and later ones alike: a page costs its rows, at 10M users as
// at 2,000.
func TestDueIsAnIndexRange(t *testing.T) {
	b, db, _ := newBook(t)
	cutoff := consent.Cutoff(time.Now())
	dueRows(t, db, cutoff)
	p, err := b.Due(context.Background(), "advertising", cutoff, "", 10)
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	for name, cursor := range map[string]string{"first page": "", "next page": p.Next} {
		q, args := consent.DueQuery("advertising", cutoff, cursor, 11)
		plan := testdb.Explain(t, db, "EXPLAIN "+q, args...)
		t.Logf("EXPLAIN %s: %v", name, plan)
		if plan["type"] != "range" || plan["key"] != "idx_user_consents_due" || strings.Contains(plan["Extra"], "filesort") {
			t.Fatalf("%s is not an ordered range of idx_user_consents_due: %v", name, plan)
		}
	}
}
