package plan

import (
	"fmt"
	"testing"
	"time"

	"pushfan/model"
)

// A segment is planned in the one pass "all" is, whatever the delivery:
// sent now, its chunks are ranges of the tokens' primary key holding
// only the filter's targets; under quiet hours each zone's targets go
// to their instant, the filter's only.
func TestASegmentIsPlannedInOnePassLikeAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(3*planStepRows, "Europe/Berlin", "Asia/Seoul")
	f.seed(users)
	seg := &model.SegmentRef{Name: "low", Version: 1, Filter: []byte(`{"and":[{"field":"user_id","op":"lt","value":40000},{"not":{"field":"user_id","op":"in","value":[7,8,9]}}]}`)}
	in := func(u user) bool { return u.target() && u.id < 40000 && (u.id < 7 || u.id > 9) }
	const width = 5000

	id := f.submit(model.Audience{Segment: seg})
	pi := f.start("a", width, nil)
	pi.finished(t, id)
	var want []uint64
	for _, u := range users {
		if in(u) {
			want = append(want, u.id)
		}
	}
	var got int64
	for _, ch := range f.chunks(id) {
		if ch.IDs != nil || !ch.NotBefore.IsZero() || ch.Targets > width {
			t.Fatalf("chunk %+v: want a range due now, at most %d targets", ch, width)
		}
		got += ch.Targets
	}
	if p := f.plan(id); got != int64(len(want)) || p.Targeted != int64(len(want)) || p.Planning {
		t.Fatalf("planned %d in chunks, %+v; want %d targets", got, p, len(want))
	}

	quiet := f.submit(model.Audience{Segment: seg, Local: &model.LocalDelivery{QuietHours: &model.QuietHours{Start: "22:00", End: "08:00"}}})
	pi.finished(t, quiet)
	berlinEnd := time.Date(2031, 12, 2, 7, 0, 0, 0, time.UTC) // 08:00 in Berlin; Seoul is at 08:30, outside
	byInstant := map[time.Time][]uint64{}
	for _, ch := range f.chunks(quiet) {
		byInstant[ch.NotBefore] = append(byInstant[ch.NotBefore], ch.IDs...)
	}
	wantAt := map[time.Time][]uint64{}
	for _, u := range users {
		if in(u) {
			at := time.Time{}
			if u.zone == "Europe/Berlin" {
				at = berlinEnd
			}
			wantAt[at] = append(wantAt[at], u.id)
		}
	}
	if fmt.Sprint(byInstant) != fmt.Sprint(wantAt) {
		t.Fatalf("quiet hours: %d instants (%d, %d targets), want %d (%d, %d)", len(byInstant), len(byInstant[time.Time{}]), len(byInstant[berlinEnd]),
			len(wantAt), len(wantAt[time.Time{}]), len(wantAt[berlinEnd]))
	}
	if p := f.plan(quiet); p.Deferred != int64(len(wantAt[berlinEnd])) {
		t.Fatalf("quiet hours: %+v, want %d deferred", p, len(wantAt[berlinEnd]))
	}
}
