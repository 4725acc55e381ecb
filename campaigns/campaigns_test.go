package campaigns_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"pushfan/campaigns"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

// finished stores a finished broadcast with these counters and message,
// and its opens and clicks as the engagement group commit counts them
// (variant, localized: 0).
type finished struct {
	at                                           string // RFC 3339
	category, job, label, app                    string
	targeted, succeeded, failed, opened, clicked int64
	dryRun                                       bool
	msg                                          string // "" : a plain message with label
}

func insert(t *testing.T, db *sql.DB, b finished) uint64 {
	t.Helper()
	at, err := time.Parse(time.RFC3339, b.at)
	if err != nil {
		t.Fatal(err)
	}
	msg := b.msg
	if msg == "" {
		m := map[string]any{"title": "t"}
		if b.label != "" {
			m["fcm_options"] = map[string]string{"analytics_label": b.label}
		}
		raw, _ := json.Marshal(m)
		msg = string(raw)
	}
	app := b.app
	if app == "" {
		app = "default"
	}
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	res, err := db.Exec(`INSERT INTO broadcasts (status, message, audience, category, job_name, app, dry_run, targeted, succeeded, failed, finished_at)
		VALUES ('completed', ?, '{"all":true}', ?, ?, ?, ?, ?, ?, ?, ?)`, msg, null(b.category), null(b.job), app, b.dryRun, b.targeted, b.succeeded, b.failed, at.UTC())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	events(t, db, uint64(id), 0, 0, b.opened, b.clicked)
	return uint64(id)
}

func events(t *testing.T, db *sql.DB, id uint64, variant, localized int, opened, clicked int64) {
	t.Helper()
	for typ, n := range map[model.EventType]int64{model.EventOpened: opened, model.EventClicked: clicked, model.EventReceived: opened + 7} {
		if n == 0 {
			continue
		}
		if _, err := db.Exec("INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES (?, ?, ?, ?, ?)", id, variant, localized, uint8(typ), n); err != nil {
			t.Fatal(err)
		}
	}
}

func days(t *testing.T, first, last string, loc *time.Location) (time.Time, time.Time) {
	t.Helper()
	from, to, err := campaigns.Days(first, last, loc)
	if err != nil {
		t.Fatal(err)
	}
	return from, to
}

func rowsText(rows []campaigns.Row, loc *time.Location) string {
	s := ""
	for _, r := range rows {
		s += fmt.Sprintf("%s %s b=%d t=%d s=%d f=%d o=%d c=%d reach=%.4f ctr=%.4f\n", r.Group, r.PeriodStart.In(loc).Format("2006-01-02 Mon"),
			r.Broadcasts, r.Targeted, r.Succeeded, r.Failed, r.Opened, r.Clicked, r.Reach, r.CTR)
	}
	return s
}

// The trends sum exactly the finished real broadcasts of the range, by
// group and period; a week starts on Monday in the query's zone, so a
// broadcast finished on Sunday 16:30 UTC is in the next week in Seoul.
func TestTrendsSumPerGroupAndPeriodInTheViewersZone(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	// Sunday 2026-11-29 16:30 UTC is Monday 2026-11-30 01:30 in Seoul.
	insert(t, db, finished{at: "2026-11-29T16:30:00Z", category: "promo", label: "bf", targeted: 100, succeeded: 90, failed: 10, opened: 30, clicked: 9})
	insert(t, db, finished{at: "2026-11-25T10:00:00Z", category: "promo", label: "bf", targeted: 50, succeeded: 40, failed: 5, opened: 4, clicked: 2})
	insert(t, db, finished{at: "2026-12-01T10:00:00Z", category: "news", job: "daily", targeted: 20, succeeded: 20})
	insert(t, db, finished{at: "2026-12-01T11:00:00Z", targeted: 7, succeeded: 3, failed: 4, opened: 1})
	// Out of every query: a dry run, a broadcast not finished, one
	// finished after the range.
	insert(t, db, finished{at: "2026-12-01T12:00:00Z", category: "promo", targeted: 1000, succeeded: 1000, dryRun: true})
	insert(t, db, finished{at: "2026-12-06T00:00:00Z", category: "promo", targeted: 1000, succeeded: 1000})
	if _, err := db.Exec(`INSERT INTO broadcasts (status, message, audience, category, targeted, succeeded) VALUES ('running', '{}', '{"all":true}', 'promo', 500, 400)`); err != nil {
		t.Fatal(err)
	}
	r := &campaigns.Reader{DB: db}
	ctx := t.Context()

	from, to := days(t, "2026-11-20", "2026-12-05", time.UTC)
	rows, err := r.Trends(ctx, campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC, Interval: campaigns.Week})
	if err != nil {
		t.Fatal(err)
	}
	want := " 2026-11-30 Mon b=1 t=7 s=3 f=4 o=1 c=0 reach=0.4286 ctr=0.0000\n" +
		"news 2026-11-30 Mon b=1 t=20 s=20 f=0 o=0 c=0 reach=1.0000 ctr=0.0000\n" +
		"promo 2026-11-23 Mon b=2 t=150 s=130 f=15 o=34 c=11 reach=0.8667 ctr=0.0846\n"
	if got := rowsText(rows, time.UTC); got != want {
		t.Fatalf("UTC weeks:\n%s\nwant\n%s", got, want)
	}

	from, to = days(t, "2026-11-20", "2026-12-05", seoul)
	rows, err = r.Trends(ctx, campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: seoul, Interval: campaigns.Week})
	if err != nil {
		t.Fatal(err)
	}
	want = " 2026-11-30 Mon b=1 t=7 s=3 f=4 o=1 c=0 reach=0.4286 ctr=0.0000\n" +
		"news 2026-11-30 Mon b=1 t=20 s=20 f=0 o=0 c=0 reach=1.0000 ctr=0.0000\n" +
		"promo 2026-11-23 Mon b=1 t=50 s=40 f=5 o=4 c=2 reach=0.8000 ctr=0.0500\n" +
		"promo 2026-11-30 Mon b=1 t=100 s=90 f=10 o=30 c=9 reach=0.9000 ctr=0.1000\n"
	if got := rowsText(rows, seoul); got != want {
		t.Fatalf("Seoul weeks:\n%s\nwant\n%s", got, want)
	}
	if p := rows[3].PeriodStart; !p.Equal(time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("Seoul's Monday starts at %s, want 2026-11-29T15:00:00Z", p.UTC())
	}

	// By label, per day in UTC, and one app only (none of these is in app x).
	from, to = days(t, "2026-11-29", "2026-11-29", time.UTC)
	rows, err = r.Trends(ctx, campaigns.Query{Group: campaigns.ByLabel, From: from, To: to, Loc: time.UTC, Interval: campaigns.Day})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsText(rows, time.UTC), "bf 2026-11-29 Sun b=1 t=100 s=90 f=10 o=30 c=9 reach=0.9000 ctr=0.1000\n"; got != want {
		t.Fatalf("by label:\n%s\nwant\n%s", got, want)
	}
	rows, err = r.Trends(ctx, campaigns.Query{Group: campaigns.ByJob, From: from, To: to, Loc: time.UTC, Interval: campaigns.Day, Apps: []string{"x"}})
	if err != nil || len(rows) != 0 {
		t.Fatalf("app x: %v %v", rows, err)
	}
}

// A resend is no campaign of its own: what it reached moves from its
// original's failed to its succeeded (a resend of the resend's too), its
// opens count there, and neither the broadcasts nor targeted grow, though
// it finished in a later period.
func TestResendsCountInTheirOriginal(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	orig := insert(t, db, finished{at: "2026-12-01T10:00:00Z", category: "promo", targeted: 100, succeeded: 90, failed: 10, opened: 5})
	first := insert(t, db, finished{at: "2026-12-02T10:00:00Z", category: "promo", targeted: 10, succeeded: 6, failed: 4, opened: 2, clicked: 1})
	second := insert(t, db, finished{at: "2026-12-03T10:00:00Z", category: "promo", targeted: 4, succeeded: 3, failed: 1})
	for child, parent := range map[uint64]uint64{first: orig, second: first} {
		if _, err := db.Exec("UPDATE broadcasts SET parent_id = ? WHERE id = ?", parent, child); err != nil {
			t.Fatal(err)
		}
	}
	from, to := days(t, "2026-11-30", "2026-12-06", time.UTC)
	rows, err := (&campaigns.Reader{DB: db}).Trends(context.Background(), campaigns.Query{Group: campaigns.ByCategory, Interval: campaigns.Week, From: from, To: to, Loc: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	want := "promo 2026-11-30 Mon b=1 t=100 s=99 f=1 o=7 c=1 reach=0.9900 ctr=0.0101\n"
	if got := rowsText(rows, time.UTC); got != want {
		t.Fatalf("trends:\n%s\nwant:\n%s", got, want)
	}
}

// A breakdown by app is exact; by locale and A/B variant of broadcasts
// counted before the split it counts each variant's sends and events, and
// leaves what is not stored null.
func TestBreakdownsCountWhatIsStored(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	plain := insert(t, db, finished{at: "2026-12-01T10:00:00Z", category: "promo", app: "shop", targeted: 10, succeeded: 8, failed: 2, opened: 4, clicked: 2})
	_ = plain
	loc := insert(t, db, finished{at: "2026-12-01T11:00:00Z", category: "promo", targeted: 30, succeeded: 28, failed: 1,
		msg: `{"title":"t","localized":{"ko":{"title":"안녕"},"en":{"title":"hi"}}}`})
	// Sent per language; engagement's localized index: en 1, ko 2, default 3.
	for name, n := range map[string]int64{"en": 10, "ko": 15, "default": 4} {
		if _, err := db.Exec("INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES (?, ?, ?)", loc, name, n); err != nil {
			t.Fatal(err)
		}
	}
	events(t, db, loc, 0, 1, 3, 1)
	events(t, db, loc, 0, 2, 6, 2)
	ab := insert(t, db, finished{at: "2026-12-02T11:00:00Z", category: "promo", targeted: 40, succeeded: 40,
		msg: `{"variants":[{"name":"short","weight":1,"title":"a","localized":{"ko":{"title":"가"}}},{"name":"long","weight":1,"title":"b"}]}`})
	for name, n := range map[string]int64{"short:ko": 12, "short:default": 8, "long": 20} {
		if _, err := db.Exec("INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES (?, ?, ?)", ab, name, n); err != nil {
			t.Fatal(err)
		}
	}
	events(t, db, ab, 1, 1, 5, 3) // short, ko
	events(t, db, ab, 2, 0, 2, 1) // long
	r := &campaigns.Reader{DB: db}
	from, to := days(t, "2026-12-01", "2026-12-02", time.UTC)
	q := campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC}
	text := func(dim campaigns.Dimension) string {
		b, err := r.Breakdown(t.Context(), q, dim)
		if err != nil {
			t.Fatal(err)
		}
		return sliceText(b)
	}
	if got, want := text(campaigns.ByApp), "[]\n"+
		`"default" b=2 sent=69 t=70 s=68 f=1 o=16 c=7 reach=0.9714 rate=0.9855 ctr=0.1029`+"\n"+
		`"shop" b=1 sent=10 t=10 s=8 f=2 o=4 c=2 reach=0.8000 rate=0.8000 ctr=0.2500`+"\n"; got != want {
		t.Fatalf("by app:\n%s\nwant\n%s", got, want)
	}
	// The variant rows were counted before succeeded and failed were:
	// their keys leave them null (and "" too, which holds one's long).
	if got, want := text(campaigns.ByLocale), "[targeted succeeded failed reach success_rate ctr]\n"+
		`"" b=2 sent=30 t=- s=- f=- o=6 c=3 reach=- rate=- ctr=-`+"\n"+
		`"ko" b=2 sent=27 t=- s=- f=- o=11 c=5 reach=- rate=- ctr=-`+"\n"+
		`"default" b=2 sent=12 t=- s=- f=- o=0 c=0 reach=- rate=- ctr=-`+"\n"+
		`"en" b=1 sent=10 t=- s=- f=- o=3 c=1 reach=- rate=- ctr=-`+"\n"; got != want {
		t.Fatalf("by locale:\n%s\nwant\n%s", got, want)
	}
	if got, want := text(campaigns.ByVariant), "[targeted succeeded failed reach success_rate ctr]\n"+
		`"" b=2 sent=39 t=40 s=36 f=3 o=13 c=5 reach=0.9000 rate=0.9231 ctr=0.1389`+"\n"+
		`"long" b=1 sent=20 t=- s=- f=- o=2 c=1 reach=- rate=- ctr=-`+"\n"+
		`"short" b=1 sent=20 t=- s=- f=- o=5 c=3 reach=- rate=- ctr=-`+"\n"; got != want {
		t.Fatalf("by variant:\n%s\nwant\n%s", got, want)
	}
	// No platform was counted for any: all three whole under "".
	if got, want := text(campaigns.ByPlatform), "[targeted opened clicked reach ctr clicks_per_sent]\n"+
		`"" b=3 sent=79 t=- s=76 f=3 o=- c=- reach=- rate=0.9620 ctr=-`+"\n"; got != want {
		t.Fatalf("by platform:\n%s\nwant\n%s", got, want)
	}
}

// A range is whole days in the zone, to included, at most MaxDays long.
func TestDaysBoundTheRange(t *testing.T) {
	t.Parallel()
	seoul, _ := time.LoadLocation("Asia/Seoul")
	from, to, err := campaigns.Days("2026-03-01", "2026-03-31", seoul)
	if err != nil || !from.Equal(time.Date(2026, 2, 28, 15, 0, 0, 0, time.UTC)) || !to.Equal(time.Date(2026, 3, 31, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("March in Seoul: %s to %s, %v", from.UTC(), to.UTC(), err)
	}
	if _, _, err := campaigns.Days("2026-01-01", "2027-02-04", time.UTC); err != nil {
		t.Fatalf("400 days: %v", err)
	}
	for _, c := range []struct{ from, to, field, code string }{
		{"2026-01-01", "2027-02-05", "to", "invalid_range"},
		{"2026-02-02", "2026-02-01", "to", "invalid_range"},
		{"2026-02-30", "2026-03-01", "from", "invalid_value"},
		{"2026-02-01", "tomorrow", "to", "invalid_value"},
	} {
		_, _, err := campaigns.Days(c.from, c.to, time.UTC)
		pe, ok := err.(*campaigns.ParamError)
		if !ok || pe.Field != c.field || pe.Code != c.code {
			t.Errorf("%s to %s: %v, want %s on %s", c.from, c.to, err, c.code, c.field)
		}
	}
	// A week across a DST change is seven calendar days: Sunday
	// 2026-11-01 23:59 EST (clocks went back that morning) is in the week
	// from Monday 2026-10-26 00:00 EDT.
	ny, _ := time.LoadLocation("America/New_York")
	got := campaigns.PeriodStart(time.Date(2026, 11, 2, 4, 59, 0, 0, time.UTC), campaigns.Week, ny)
	if want := time.Date(2026, 10, 26, 4, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("the week of 2026-11-01 23:59 EST starts %s, want %s", got.UTC(), want)
	}
}
