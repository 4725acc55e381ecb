package campaigns_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pushfan/campaigns"
	"pushfan/internal/testsupport/testdb"
)

// BenchmarkTrendsOfAYear reads a year of 10,000 finished broadcasts (each
// with opens and clicks counted, a tenth localized) per category and
// week, and breaks them down by language: the longest query the routes
// allow at that volume. It logs the plan's access to broadcasts.
func BenchmarkTrendsOfAYear(b *testing.B) {
	db := testdb.New(b).SQL.DB
	const n = 10000
	start := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	for lo := 0; lo < n; lo += 500 {
		var rows, counts, variants []string
		for i := lo; i < lo+500; i++ {
			at := start.Add(time.Duration(i) * 365 * 24 * time.Hour / n).Format("2006-01-02 15:04:05")
			msg := `{"title":"t"}`
			if i%10 == 0 {
				msg = `{"title":"t","localized":{"ko":{"title":"k"}}}`
				variants = append(variants, fmt.Sprintf("(%d,'ko',60),(%d,'default',40)", i+1, i+1))
			}
			rows = append(rows, fmt.Sprintf(`(%d,'completed','%s','{"all":true}','c%d',100,95,5,'%s')`, i+1, msg, i%8, at))
			counts = append(counts, fmt.Sprintf("(%d,0,%d,2,30),(%d,0,%d,3,6)", i+1, i%10/9, i+1, i%10/9))
		}
		for _, q := range []string{
			"INSERT INTO broadcasts (id, status, message, audience, category, targeted, succeeded, failed, finished_at) VALUES " + strings.Join(rows, ","),
			"INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES " + strings.Join(counts, ","),
		} {
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		if len(variants) > 0 {
			if _, err := db.Exec("INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES " + strings.Join(variants, ",")); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := db.Exec("ANALYZE TABLE broadcasts, engagement_counts"); err != nil {
		b.Fatal(err)
	}
	// The plan of a month and of the whole year: a range of
	// idx_broadcasts_finished, or (every row in range) the table itself.
	for _, rng := range [][2]string{{"2026-06-01", "2026-07-01"}, {"2025-12-01", "2027-01-05"}} {
		var id, sel, table, typ, possible, key, keyLen, ref, rowsN, extra any
		if err := db.QueryRow(`EXPLAIN SELECT b.id FROM broadcasts b WHERE b.finished_at >= ? AND b.finished_at < ? AND b.dry_run = 0`, rng[0], rng[1]).
			Scan(&id, &sel, &table, &typ, &possible, &key, &keyLen, &ref, &rowsN, &extra); err != nil {
			b.Fatal(err)
		}
		b.Logf("plan of %s to %s: %s, key %s, rows %s", rng[0], rng[1], typ, key, rowsN)
	}
	r := &campaigns.Reader{DB: db}
	from, to, err := campaigns.Days("2025-12-01", "2027-01-04", time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	q := campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC, Interval: campaigns.Week}
	b.Run("trends", func(b *testing.B) {
		for b.Loop() {
			rows, err := r.Trends(b.Context(), q)
			if err != nil || len(rows) == 0 {
				b.Fatal(rows, err)
			}
		}
	})
	b.Run("by-locale", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Breakdown(b.Context(), q, campaigns.ByLocale); err != nil {
				b.Fatal(err)
			}
		}
	})
	q.Group = campaigns.ByLabel
	b.Run("trends-by-label", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Trends(b.Context(), q); err != nil {
				b.Fatal(err)
			}
		}
	})
}
