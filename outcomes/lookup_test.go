package outcomes_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/lease/outcome"
	"pushfan/outcomes"
)

const perCkpt = 2000

type fixture struct {
	t  *testing.T
	db *sql.DB
	s  *lease.Store
}

func (f *fixture) ctx() context.Context {
	c, cancel := context.WithTimeout(f.t.Context(), 2*time.Minute)
	f.t.Cleanup(cancel)
	return c
}

// broadcast inserts a broadcast (audience JSON aud, resend of parent when
// not 0) over cursors 1..hi and stores its outcomes through the lease's
// checkpoints, perCkpt targets each: kind(x) is target x's outcome, 0 for
// none (not in the audience, or never read: the run stops at stop).
func (f *fixture) broadcast(title, aud string, parent, hi, stop uint64, kind func(x uint64) (lease.OutcomeKind, string)) uint64 {
	f.t.Helper()
	ctx := f.ctx()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	var p any
	if parent != 0 {
		p = parent
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, parent_id, started_at) VALUES (JSON_OBJECT('title', ?), ?, ?, UTC_TIMESTAMP(6))`, title, aud, p)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, []lease.Plan{{Lo: 0, Hi: hi, Targets: int64(hi)}}); err != nil {
		f.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		f.t.Fatal(err)
	}
	c, err := f.s.Claim(ctx, lease.ClaimOptions{Owner: "t", Lease: time.Minute})
	if err != nil || c == nil || c.BroadcastID != uint64(id) {
		f.t.Fatalf("claim: %+v %v", c, err)
	}
	for lo := uint64(1); lo <= stop; lo += perCkpt {
		top := min(lo+perCkpt-1, stop)
		var outs []lease.TargetOutcome
		cp := lease.Checkpoint{Cursor: top, End: lease.KeepLease, Lease: time.Minute, Errors: map[string]int64{}}
		for x := lo; x <= top; x++ {
			k, code := kind(x)
			if k == 0 {
				continue
			}
			outs = append(outs, lease.TargetOutcome{Cursor: x, Kind: k, Code: code})
			switch k {
			case lease.OutcomeSucceeded:
				cp.Succeeded++
			case lease.OutcomeFailed:
				cp.Failed++
				cp.Errors[code]++
			case lease.OutcomeCapped:
				cp.Capped++
			}
		}
		if top == hi {
			cp.End = lease.Done
		}
		cp.Outcomes = func() []lease.TargetOutcome { return outs }
		if _, err := f.s.Checkpoint(ctx, c, cp); err != nil {
			f.t.Fatal(err)
		}
	}
	return uint64(id)
}

func accepted(uint64) (lease.OutcomeKind, string) { return lease.OutcomeSucceeded, "" }

// A user's deliveries on a few hundred thousand kept targets: every
// device's outcome (a failure's code, a cap, a resend's later outcome, an
// open), newest first, named audiences and broadcasts without the user
// left out, paged by after; each token's look-up reads the bounded
// index range EXPLAIN names, a small share of the table's rows.
func TestAUsersDeliveriesReadABoundedRangePerToken(t *testing.T) {
	tdb := testdb.New(t)
	f := &fixture{t: t, db: tdb.SQL.DB, s: lease.New(tdb.SQL.DB, nil)}
	ctx := f.ctx()
	// User 42's devices: 5000 and 77777, and 199999 dead since.
	if _, err := f.db.ExecContext(ctx, `INSERT INTO users (id) VALUES (42), (43)`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, `INSERT INTO device_tokens (id, user_id, token, platform, invalidated_at) VALUES
		(5000, 42, 'a', 'android', NULL), (77777, 42, 'b', 'ios', NULL), (199999, 42, 'c', 'web', UTC_TIMESTAMP(6)), (7, 43, 'd', 'ios', NULL)`); err != nil {
		t.Fatal(err)
	}
	const n = 200_000
	b1 := f.broadcast("first", `{"all":true}`, 0, n, n, func(x uint64) (lease.OutcomeKind, string) {
		if x == 5000 {
			return lease.OutcomeFailed, "UNAVAILABLE"
		}
		return lease.OutcomeSucceeded, ""
	})
	// Canceled at 150,000: the rest never read, no outcome kept.
	b2 := f.broadcast("second", `{"all":true}`, 0, n, 150_000, func(x uint64) (lease.OutcomeKind, string) {
		if x == 77777 {
			return lease.OutcomeCapped, ""
		}
		return lease.OutcomeSucceeded, ""
	})
	named := f.broadcast("named", `{"name":"vips"}`, 0, n, n, accepted)
	resend := f.broadcast("first (resend)", `{"resend_of":1}`, b1, 5000, 5000, func(x uint64) (lease.OutcomeKind, string) {
		if x == 5000 {
			return lease.OutcomeSucceeded, ""
		}
		return 0, ""
	})
	other := f.broadcast("not theirs", `{"user_ids":[43]}`, 0, 1000, 1000, func(x uint64) (lease.OutcomeKind, string) {
		if x == 7 {
			return lease.OutcomeSucceeded, ""
		}
		return 0, ""
	})
	_ = named
	_ = other
	if _, err := f.db.ExecContext(ctx, `INSERT INTO engagement_events (broadcast_id, target_id, type, user_id, variant, localized, sent_at, at)
		VALUES (?, 5000, 2, 42, 0, 0, UTC_TIMESTAMP(6), '2026-12-01 10:00:00')`, b2); err != nil {
		t.Fatal(err)
	}
	r := &outcomes.Reader{DB: f.db}

	rr := testdb.NewRowsRead(t, tdb.SQL)
	var page outcomes.Page
	read := rr.During(func() {
		var err error
		if page, err = r.Deliveries(ctx, 42, 10, 0); err != nil {
			t.Fatal(err)
		}
	}, "target_outcomes")
	got := summary(page)
	want := "second: 5000 android accepted opened, 77777 ios capped | first: 5000 android accepted resend, 77777 ios accepted, 199999 web accepted"
	if got != want {
		t.Fatalf("deliveries:\n got %s\nwant %s", got, want)
	}
	if page.NextAfter != nil || page.Scanned != 4 {
		t.Fatalf("next %v, scanned %d; want none and 4 (the resend is its parent's)", page.NextAfter, page.Scanned)
	}

	// The rows read: per token, the index range of hi in [token,
	// token+MaxSpan] of each broadcast, nothing else, a small share of
	// the table.
	var total, inRange int64
	if err := f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM target_outcomes").Scan(&total); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []uint64{5000, 77777, 199999} {
		var k int64
		if err := f.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM target_outcomes WHERE broadcast_id IN (?, ?, ?, ?) AND hi BETWEEN ? AND ?`,
			b1, b2, other, resend, tok, tok+outcome.MaxSpan).Scan(&k); err != nil {
			t.Fatal(err)
		}
		inRange += k
	}
	// +1 a token and broadcast: the range scan reads the entry past its end.
	if r := read["target_outcomes"]; r > inRange+3*4 || r*4 > total {
		t.Fatalf("the lookup read %d rows of target_outcomes (%d in the index ranges, %d in the table)", r, inRange, total)
	}
	t.Logf("kept %d rows for %d targets; the lookup read %d (index ranges hold %d)", total, 3*n+5000+1000, read["target_outcomes"], inRange)

	// EXPLAIN: a range of the (broadcast_id, hi, lo) index.
	q := outcome.LookupQuery(3)
	rows, err := f.db.QueryContext(ctx, "EXPLAIN "+q, b1, b2, other, 5000, 5000+outcome.MaxSpan, 5000)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		if row["key"] != "target_outcomes_hi" || row["type"] != "range" {
			t.Fatalf("EXPLAIN: %v, want a range of target_outcomes_hi", row)
		}
	}
	rows.Close()

	// Paged: one at a time, newest first.
	p1, err := r.Deliveries(ctx, 42, 1, 0)
	if err != nil || len(p1.Deliveries) != 1 || p1.Deliveries[0].BroadcastID != b2 || p1.NextAfter == nil || *p1.NextAfter != b2 {
		t.Fatalf("first page: %+v %v", p1, err)
	}
	p2, err := r.Deliveries(ctx, 42, 1, *p1.NextAfter)
	if err != nil || len(p2.Deliveries) != 1 || p2.Deliveries[0].BroadcastID != b1 {
		t.Fatalf("second page: %+v %v", p2, err)
	}
	// A bound on the broadcasts walked: it answers with where to go on.
	p3, err := (&outcomes.Reader{DB: f.db, Scan: 1}).Deliveries(ctx, 42, 10, 0)
	if err != nil || len(p3.Deliveries) != 0 || p3.Scanned != 1 || p3.NextAfter == nil || *p3.NextAfter != other {
		t.Fatalf("bounded walk: %+v %v", p3, err)
	}
	// A user without tokens has none.
	if p, err := r.Deliveries(ctx, 999, 10, 0); err != nil || len(p.Deliveries) != 0 {
		t.Fatalf("a user without tokens: %+v %v", p, err)
	}
}

func summary(p outcomes.Page) string {
	var ds []string
	for _, d := range p.Deliveries {
		var devs []string
		for _, dv := range d.Devices {
			f := []string{fmt.Sprint(dv.TokenID), dv.Platform, dv.Outcome}
			if dv.Code != "" {
				f = append(f, dv.Code)
			}
			if dv.OpenedAt != nil {
				f = append(f, "opened")
			}
			if dv.ResendID != 0 {
				f = append(f, "resend")
			}
			devs = append(devs, strings.Join(f, " "))
		}
		ds = append(ds, d.Title+": "+strings.Join(devs, ", "))
	}
	return strings.Join(ds, " | ")
}
