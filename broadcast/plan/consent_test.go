package plan

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"pushfan/lease"
	"pushfan/model"
)

// An advertising broadcast to every user, 200,000 of them, is planned in
// the same one pass as a plain one: the users without consent are in no
// chunk and counted, those inside the night window without night consent
// wait in chunks of the window's end in their zone, and every other
// target is due now. Half the users consented, a quarter at night too;
// Berlin is inside 21:00–08:00 at the fixture's now (00:30), Seoul not
// (08:30).
func TestAConsentPlanLeavesOutAndDefersInItsOnePass(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(200_000, "Europe/Berlin", "Asia/Seoul")
	f.seed(users)
	f.consent(users, func(id uint64) (bool, bool) { return id%2 == 0, id%4 == 0 })
	cat := &model.Category{Name: "advertising", Consent: model.ConsentTable,
		Night: &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}, Consent: model.ConsentTable}}
	id := f.submitIn(model.Audience{All: true, Local: &model.LocalDelivery{Night: &cat.Night.Window}}, cat)
	const width = 10000
	pi := f.start("a", width, nil)
	pi.finished(t, id)

	berlinEnd := time.Date(2031, 12, 2, 7, 0, 0, 0, time.UTC) // 08:00 in Berlin
	want := map[time.Time][]uint64{}
	var excluded, deferred int64
	for _, u := range users {
		if !u.target() {
			continue
		}
		switch {
		case u.id%2 != 0:
			excluded++
		case u.zone == "Europe/Berlin" && u.id%4 != 0:
			deferred++
			want[berlinEnd] = append(want[berlinEnd], u.id)
		default:
			want[time.Time{}] = append(want[time.Time{}], u.id)
		}
	}
	got := map[time.Time][]uint64{}
	chunks := f.chunks(id)
	for _, ch := range chunks {
		if ch.Targets != int64(len(ch.IDs)) || ch.Targets > width {
			t.Fatalf("chunk %+v: its count is not its list, or over the width", ch)
		}
		got[ch.NotBefore] = append(got[ch.NotBefore], ch.IDs...)
	}
	for at, ids := range want {
		if fmt.Sprint(got[at]) != fmt.Sprint(ids) {
			t.Fatalf("targets due at %v: %d, want %d (first %v vs %v)", at, len(got[at]), len(ids), head(got[at]), head(ids))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("instants %d, want %d", len(got), len(want))
	}
	p := f.plan(id)
	var nc, nd int64
	if err := f.db.SQL.QueryRowContext(f.ctx(), "SELECT excluded_no_consent, night_deferred FROM broadcasts WHERE id = ?", id).Scan(&nc, &nd); err != nil {
		t.Fatal(err)
	}
	if p.Planning || p.Targeted != int64(len(want[time.Time{}])+len(want[berlinEnd])) || nc != excluded || nd != deferred || p.Deferred != 0 {
		t.Fatalf("plan %+v, excluded_no_consent %d, night_deferred %d: want targeted %d, %d excluded, %d night-deferred",
			p, nc, nd, len(want[time.Time{}])+len(want[berlinEnd]), excluded, deferred)
	}
}

// consent writes the bundled table's rows: granted and night by user id.
func (f *fixture) consent(users []user, of func(id uint64) (granted, night bool)) {
	f.t.Helper()
	const batch = 5000
	for lo := 0; lo < len(users); lo += batch {
		var rows []string
		var args []any
		for _, u := range users[lo:min(lo+batch, len(users))] {
			g, n := of(u.id)
			rows = append(rows, "(?, 'advertising', ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
			args = append(args, u.id, g, n)
		}
		if _, err := f.db.SQL.ExecContext(f.ctx(), "INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at) VALUES "+
			strings.Join(rows, ", "), args...); err != nil {
			f.t.Fatal(err)
		}
	}
}

// submitIn is submit for a broadcast in category cat.
func (f *fixture) submitIn(a model.Audience, cat *model.Category) uint64 {
	f.t.Helper()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: a, Category: cat}}
	noPlan := func(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return nil, nil }
	if err := f.leases.Submit(f.ctx(), b, noPlan); err != nil {
		f.t.Fatal(err)
	}
	return b.ID
}

func head(ids []uint64) []uint64 { return ids[:min(len(ids), 5)] }
