package campaigns_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"pushfan/campaigns"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/lease/sends"
	"pushfan/model"
)

// sendThrough stores a broadcast of msg with one chunk of targets and
// runs its checkpoints through the lease store as a run does, the first
// one retried after a lost answer (a replay must add nothing); then marks
// it finished at at.
func sendThrough(t *testing.T, db *sql.DB, s *lease.Store, msg string, targets int64, at string, cps ...lease.Checkpoint) uint64 {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, category) VALUES (?, '{"all":true}', 'promo')`, msg)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, []lease.Plan{{Lo: 0, Hi: uint64(targets), Targets: targets}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, lease.ClaimOptions{Owner: "a", Lease: time.Minute})
	if err != nil || c == nil || c.BroadcastID != uint64(id) {
		t.Fatalf("claim: %+v %v", c, err)
	}
	for i, cp := range cps {
		cp.Lease, cp.End = time.Minute, lease.KeepLease
		if i == len(cps)-1 {
			cp.Cursor, cp.End = c.Hi, lease.Done
		}
		before := *c
		if _, err := s.Checkpoint(ctx, c, cp); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if r, err := s.Checkpoint(ctx, &before, cp); err != nil || !r.Replayed {
				t.Fatalf("retried checkpoint: %+v %v, want a replay", r, err)
			}
		}
	}
	if _, err := db.Exec("UPDATE broadcasts SET status = 'completed', finished_at = ?, targeted = ? WHERE id = ?", at, targets, id); err != nil {
		t.Fatal(err)
	}
	return uint64(id)
}

// checkpoint is one checkpoint's sends: platforms android, ios, web, other.
func checkpoint(cursor uint64, plat [4]sends.Sent, variants map[string]sends.Sent) lease.Checkpoint {
	cp := lease.Checkpoint{Cursor: cursor, Sends: sends.Split{Variants: variants, Platforms: plat}}
	for _, n := range plat {
		cp.Succeeded, cp.Failed = cp.Succeeded+n.Succeeded, cp.Failed+n.Failed
	}
	return cp
}

func sliceText(b campaigns.Breakdown) string {
	opt := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	frac := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", *p)
	}
	s := fmt.Sprint(b.NotStored) + "\n"
	for _, x := range b.Rows {
		s += fmt.Sprintf("%q b=%d sent=%d t=%s s=%s f=%s o=%s c=%s reach=%s rate=%s ctr=%s\n", x.Key, x.Broadcasts, x.Sent, opt(x.Targeted), opt(x.Succeeded), opt(x.Failed),
			opt(x.Opened), opt(x.Clicked), frac(x.Reach), frac(x.SuccessRate), frac(x.CTR))
	}
	return s
}

// The checkpoints count each broadcast's sends per platform and per
// variant, succeeded and failed apart, once however often a checkpoint is
// retried; the breakdowns sum them exactly, and a broadcast sent before
// they were counted (or whose counters a fenced holder's moved sends
// raised) is never split wrongly: by platform it stands whole under "",
// by locale its keys leave succeeded and failed null. The events here were
// counted without platforms: the platforms of broadcasts with opens leave
// opened and clicked null; those of broadcasts without any have 0.
func TestBreakdownsSumTheSendsTheCheckpointsSplit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	s := lease.New(db, nil)
	sent := func(ok, failed int64) sends.Sent { return sends.Sent{Succeeded: ok, Failed: failed} }
	// A plain broadcast to android, ios, web and other tokens, in two
	// checkpoints.
	sendThrough(t, db, s, `{"title":"t"}`, 100, "2026-12-01 10:00:00",
		checkpoint(70, [4]sends.Sent{sent(30, 5), sent(20, 3), sent(10, 2)}, nil),
		checkpoint(0, [4]sends.Sent{3: sent(25, 5)}, nil))
	// An A/B split, its short variant localized, to android tokens.
	ab := sendThrough(t, db, s, `{"variants":[{"name":"short","weight":1,"title":"a","localized":{"ko":{"title":"가"}}},{"name":"long","weight":1,"title":"b"}]}`, 40, "2026-12-01 11:00:00",
		checkpoint(0, [4]sends.Sent{sent(37, 3)}, map[string]sends.Sent{"short:ko": sent(12, 1), "short:default": sent(7, 0), "long": sent(18, 2)}))
	// A localized message to ios tokens, in two checkpoints.
	loc := sendThrough(t, db, s, `{"title":"t","localized":{"ko":{"title":"안녕"},"en":{"title":"hi"}}}`, 30, "2026-12-02 10:00:00",
		checkpoint(20, [4]sends.Sent{1: sent(18, 2)}, map[string]sends.Sent{"ko": sent(10, 1), "en": sent(6, 1), "default": sent(2, 0)}),
		checkpoint(0, [4]sends.Sent{1: sent(9, 1)}, map[string]sends.Sent{"ko": sent(4, 0), "en": sent(3, 0), "default": sent(2, 1)}))
	events(t, db, loc, 0, 2, 6, 2) // ko
	events(t, db, ab, 1, 1, 5, 3)  // short, ko
	events(t, db, ab, 2, 0, 2, 1)  // long
	// Sent before the split was counted: a plain one, and a localized one
	// whose variant row has its sends only.
	insert(t, db, finished{at: "2026-12-02T11:00:00Z", category: "promo", targeted: 10, succeeded: 8, failed: 2})
	old := insert(t, db, finished{at: "2026-12-02T12:00:00Z", category: "promo", targeted: 6, succeeded: 5, failed: 1, msg: `{"title":"t","localized":{"ja":{"title":"や"}}}`})
	if _, err := db.Exec("INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES (?, 'ja', 6)", old); err != nil {
		t.Fatal(err)
	}

	// A cancel's close moved a fenced holder's 2 sends out of canceled:
	// the counters grew, no platform did, so its platforms are not split.
	moved := sendThrough(t, db, s, `{"title":"t"}`, 6, "2026-12-02 13:00:00", checkpoint(0, [4]sends.Sent{2: sent(4, 0)}, nil))
	if _, err := db.Exec("UPDATE broadcasts SET succeeded = succeeded + 2 WHERE id = ?", moved); err != nil {
		t.Fatal(err)
	}

	var n [2]int64
	if err := db.QueryRow("SELECT android_succeeded, android_failed FROM broadcasts WHERE id = ?", ab).Scan(&n[0], &n[1]); err != nil || n != [2]int64{37, 3} {
		t.Fatalf("android of the A/B broadcast: %v %v", n, err)
	}
	r := &campaigns.Reader{DB: db}
	from, to := days(t, "2026-12-01", "2026-12-02", time.UTC)
	q := campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC}
	breakdown := func(dim campaigns.Dimension) campaigns.Breakdown {
		b, err := r.Breakdown(context.Background(), q, dim)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := breakdown(campaigns.ByPlatform)
	if got, want := sliceText(b), "[targeted opened clicked reach ctr clicks_per_sent]\n"+
		`"android" b=2 sent=75 t=- s=67 f=8 o=- c=- reach=- rate=0.8933 ctr=-`+"\n"+
		`"ios" b=2 sent=53 t=- s=47 f=6 o=- c=- reach=- rate=0.8868 ctr=-`+"\n"+
		`"other" b=1 sent=30 t=- s=25 f=5 o=0 c=0 reach=- rate=0.8333 ctr=0.0000`+"\n"+
		`"" b=3 sent=22 t=- s=19 f=3 o=- c=- reach=- rate=0.8636 ctr=-`+"\n"+
		`"web" b=1 sent=12 t=- s=10 f=2 o=0 c=0 reach=- rate=0.8333 ctr=0.0000`+"\n"; got != want {
		t.Fatalf("by platform:\n%s\nwant\n%s", got, want)
	}
	if b.Note == "" {
		t.Fatal("by platform: no note")
	}
	if got, want := sliceText(breakdown(campaigns.ByLocale)), "[targeted succeeded failed reach success_rate ctr]\n"+
		`"" b=4 sent=136 t=- s=117 f=19 o=2 c=1 reach=- rate=0.8603 ctr=0.0085`+"\n"+
		`"ko" b=2 sent=28 t=- s=26 f=2 o=11 c=5 reach=- rate=0.9286 ctr=0.1923`+"\n"+
		`"default" b=2 sent=12 t=- s=11 f=1 o=0 c=0 reach=- rate=0.9167 ctr=0.0000`+"\n"+
		`"en" b=1 sent=10 t=- s=9 f=1 o=0 c=0 reach=- rate=0.9000 ctr=0.0000`+"\n"+
		`"ja" b=1 sent=6 t=- s=- f=- o=0 c=0 reach=- rate=- ctr=-`+"\n"; got != want {
		t.Fatalf("by locale:\n%s\nwant\n%s", got, want)
	}
	if got, want := sliceText(breakdown(campaigns.ByVariant)), "[targeted reach]\n"+
		`"" b=5 sent=152 t=152 s=131 f=21 o=6 c=2 reach=0.8618 rate=0.8618 ctr=0.0153`+"\n"+
		`"long" b=1 sent=20 t=- s=18 f=2 o=2 c=1 reach=- rate=0.9000 ctr=0.0556`+"\n"+
		`"short" b=1 sent=20 t=- s=19 f=1 o=5 c=3 reach=- rate=0.9500 ctr=0.1579`+"\n"; got != want {
		t.Fatalf("by variant:\n%s\nwant\n%s", got, want)
	}
}

// A resend's successes move from its original's failed to its succeeded
// on their platforms; a resend whose platforms were not counted leaves its
// original's platforms not split (whole under ""), never guessed.
func TestResendsMovePerPlatform(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	orig := insert(t, db, finished{at: "2026-12-01T10:00:00Z", category: "promo", targeted: 100, succeeded: 90, failed: 10, opened: 5, clicked: 2})
	exec("UPDATE broadcasts SET android_succeeded = 50, android_failed = 6, ios_succeeded = 40, ios_failed = 4 WHERE id = ?", orig)
	resend := insert(t, db, finished{at: "2026-12-02T10:00:00Z", category: "promo", targeted: 10, succeeded: 7, failed: 3, opened: 2, clicked: 1})
	exec("UPDATE broadcasts SET parent_id = ?, android_succeeded = 4, android_failed = 2, ios_succeeded = 3, ios_failed = 1 WHERE id = ?", orig, resend)
	// The opens and clicks, the resend's with its original's: each
	// counted per platform as well.
	platformEvents(t, db, orig, model.PlatformAndroid, 3, 1)
	platformEvents(t, db, orig, model.PlatformIOS, 2, 1)
	platformEvents(t, db, resend, model.PlatformAndroid, 2, 1)
	orig2 := insert(t, db, finished{at: "2026-12-01T11:00:00Z", category: "promo", targeted: 12, succeeded: 10, failed: 2})
	exec("UPDATE broadcasts SET android_succeeded = 10, android_failed = 2 WHERE id = ?", orig2)
	old := insert(t, db, finished{at: "2026-12-02T11:00:00Z", category: "promo", targeted: 2, succeeded: 1, failed: 1})
	exec("UPDATE broadcasts SET parent_id = ? WHERE id = ?", orig2, old)

	from, to := days(t, "2026-12-01", "2026-12-02", time.UTC)
	b, err := (&campaigns.Reader{DB: db}).Breakdown(context.Background(), campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC}, campaigns.ByPlatform)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sliceText(b), "[targeted opened clicked reach ctr clicks_per_sent]\n"+
		`"android" b=1 sent=56 t=- s=54 f=2 o=5 c=2 reach=- rate=0.9643 ctr=0.0370`+"\n"+
		`"ios" b=1 sent=44 t=- s=43 f=1 o=2 c=1 reach=- rate=0.9773 ctr=0.0233`+"\n"+
		`"" b=1 sent=12 t=- s=11 f=1 o=- c=- reach=- rate=0.9167 ctr=-`+"\n"; got != want {
		t.Fatalf("by platform:\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(b.Note, "opens and clicks are counted per platform") {
		t.Fatalf("by platform: every platform row has its events, the note says otherwise: %s", b.Note)
	}
}

// platformEvents counts a broadcast's opens and clicks on platform as the
// engagement group commit does (engagement_platform_counts; "": events
// whose token carried no platform).
func platformEvents(t *testing.T, db *sql.DB, id uint64, platform string, opened, clicked int64) {
	t.Helper()
	for typ, n := range map[model.EventType]int64{model.EventOpened: opened, model.EventClicked: clicked, model.EventReceived: opened + 7} {
		if n == 0 {
			continue
		}
		if _, err := db.Exec("INSERT INTO engagement_platform_counts (broadcast_id, platform, type, n) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)",
			id, model.PlatformCode(platform), uint8(typ), n); err != nil {
			t.Fatal(err)
		}
	}
}

// A platform row has opens, clicks and a CTR (clicked ÷ succeeded) when
// every broadcast in it counted its events per platform: those of known
// platforms add up to its opened and clicked. One whose events were
// counted, some or all, without a platform (an event token signed before
// pushfan put it there) leaves its platforms' rows null, and the note
// says why; its events are never put on a platform.
func TestPlatformRowsCountOpensAndClicksWhenEveryBroadcastCarriesThem(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	split := func(id uint64, android, ios, web [2]int64) {
		t.Helper()
		if _, err := db.Exec(`UPDATE broadcasts SET android_succeeded = ?, android_failed = ?, ios_succeeded = ?, ios_failed = ?,
			web_succeeded = ?, web_failed = ? WHERE id = ?`, android[0], android[1], ios[0], ios[1], web[0], web[1], id); err != nil {
			t.Fatal(err)
		}
	}
	// Week one: two broadcasts whose events all carry a platform.
	a := insert(t, db, finished{at: "2026-12-01T10:00:00Z", category: "promo", targeted: 100, succeeded: 90, failed: 10, opened: 30, clicked: 9})
	split(a, [2]int64{50, 5}, [2]int64{30, 5}, [2]int64{10, 0})
	platformEvents(t, db, a, model.PlatformAndroid, 20, 6)
	platformEvents(t, db, a, model.PlatformIOS, 8, 3)
	platformEvents(t, db, a, model.PlatformWeb, 2, 0)
	b := insert(t, db, finished{at: "2026-12-02T10:00:00Z", category: "promo", targeted: 40, succeeded: 40, opened: 4, clicked: 1})
	split(b, [2]int64{40, 0}, [2]int64{}, [2]int64{})
	platformEvents(t, db, b, model.PlatformAndroid, 4, 1)
	// Week two: one more whose ios open came from an old token (platform
	// not known), besides its android events.
	c := insert(t, db, finished{at: "2026-12-08T10:00:00Z", category: "promo", targeted: 20, succeeded: 20, opened: 5, clicked: 2})
	split(c, [2]int64{10, 0}, [2]int64{10, 0}, [2]int64{})
	platformEvents(t, db, c, model.PlatformAndroid, 4, 2)
	platformEvents(t, db, c, "", 1, 0)

	r := &campaigns.Reader{DB: db}
	breakdown := func(first, last string) campaigns.Breakdown {
		t.Helper()
		from, to := days(t, first, last, time.UTC)
		got, err := r.Breakdown(t.Context(), campaigns.Query{Group: campaigns.ByCategory, From: from, To: to, Loc: time.UTC}, campaigns.ByPlatform)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	week := breakdown("2026-12-01", "2026-12-07")
	if got, want := sliceText(week), "[targeted reach]\n"+
		`"android" b=2 sent=95 t=- s=90 f=5 o=24 c=7 reach=- rate=0.9474 ctr=0.0778`+"\n"+
		`"ios" b=1 sent=35 t=- s=30 f=5 o=8 c=3 reach=- rate=0.8571 ctr=0.1000`+"\n"+
		`"web" b=1 sent=10 t=- s=10 f=0 o=2 c=0 reach=- rate=1.0000 ctr=0.0000`+"\n"; got != want {
		t.Fatalf("week one by platform:\n%s\nwant\n%s", got, want)
	}
	if cps := week.Rows[0].ClicksPerSent; cps == nil || fmt.Sprintf("%.4f", *cps) != "0.0737" {
		t.Fatalf("android clicks per sent: %v, want 7/95", cps)
	}
	if strings.Contains(week.Note, "opens and clicks are counted per platform") {
		t.Fatalf("week one: the note speaks of events not known: %s", week.Note)
	}
	both := breakdown("2026-12-01", "2026-12-14")
	if got, want := sliceText(both), "[targeted opened clicked reach ctr clicks_per_sent]\n"+
		`"android" b=3 sent=105 t=- s=100 f=5 o=- c=- reach=- rate=0.9524 ctr=-`+"\n"+
		`"ios" b=2 sent=45 t=- s=40 f=5 o=- c=- reach=- rate=0.8889 ctr=-`+"\n"+
		`"web" b=1 sent=10 t=- s=10 f=0 o=2 c=0 reach=- rate=1.0000 ctr=0.0000`+"\n"; got != want {
		t.Fatalf("both weeks by platform:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(both.Note, "opens and clicks are counted per platform") {
		t.Fatalf("both weeks: the note does not say why opens are null: %s", both.Note)
	}
}
