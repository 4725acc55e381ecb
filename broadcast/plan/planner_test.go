package plan

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/model"
)

// now is every planner's clock here: 08:30 on Dec 2 in Seoul, 18:30 on
// Dec 1 in New York, 00:30 on Dec 2 in Berlin, 13:30 on Dec 2 on
// Kiritimati (UTC+14). It is years ahead of the database's clock, so
// that a chunk due at one of these instants waits.
var now = time.Date(2031, 12, 1, 23, 30, 0, 0, time.UTC)

// many is an audience of three plan steps (planStepRows each): ids
// 1..n, every 7th token invalidated and every 11th user's pushes off,
// zones in turn from zones.
func many(n int, zones ...string) []user {
	us := make([]user, n)
	for i := range us {
		id := uint64(i + 1)
		us[i] = user{id: id, invalid: id%7 == 0, off: id%11 == 0}
		if len(zones) > 0 {
			us[i].zone = zones[i%len(zones)]
		}
	}
	return us
}

// An `all` audience sent now is planned in steps into contiguous ranges
// of the chunk width, each (Lo, Hi] holding exactly width targets but the
// last, and targeted counts every valid token of a user who takes pushes
// and nothing else.
func TestAnAllAudienceIsPlannedIntoRangesOfTheChunkWidth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(2*planStepRows + 5000)
	f.seed(users)
	id := f.submit(model.Audience{All: true})
	const width = 10000
	pi := f.start("a", width, nil)
	pi.finished(t, id)

	ids := targets(users)
	var want []chunk
	for lo := 0; lo < len(ids); lo += width {
		part := ids[lo:min(lo+width, len(ids))]
		c := chunk{Seq: len(want), Hi: part[len(part)-1], Targets: int64(len(part)), Status: "pending"}
		if len(want) > 0 {
			c.Lo = want[len(want)-1].Hi
		}
		want = append(want, c)
	}
	if got := f.chunks(id); !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks: %s", firstDiff(got, want))
	}
	if len(ids) != 35066 || len(want) != 4 {
		t.Fatalf("the audience has %d targets in %d chunks: the fixture changed", len(ids), len(want))
	}
	got := f.plan(id)
	if got.Planning || got.Targeted != int64(len(ids)) || got.Seq != len(want) || got.MaxTokenID != uint64(len(users)) || got.Width != width {
		t.Fatalf("plan %+v: want planned, %d targeted in %d chunks, snapshot %d, width %d", got, len(ids), len(want), len(users), width)
	}
}

// A local-time plan puts each user's target in a chunk of the instant
// their zone reaches (send_at_local, or a quiet window's end): one group
// for every zone already due (due now, no NotBefore), the default zone's
// for a NULL or unknown zone, each group cut at the chunk width, each
// chunk carrying its target list; deferred and zone_fallbacks count the
// targets moved to a quiet window's end and those with no known zone.
func TestALocalTimePlanPutsEachZoneInChunksOfItsInstant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	zones := []string{"Asia/Seoul", "America/New_York", "Europe/Berlin", "", "Not/AZone", "Pacific/Kiritimati"}
	var users []user
	for i := range 60 { // ten of each zone, in turn
		users = append(users, user{id: uint64(i + 1), zone: zones[i%len(zones)]})
	}
	users[0].invalid, users[1].off = true, true // one Seoul and one New York user who are not targets
	f.seed(users)

	day := func(d, h int) time.Time { return time.Date(2031, 12, d, h, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name  string
		local *model.LocalDelivery
		// due is each zone's instant (zero: now), worked out by hand.
		due                 map[string]time.Time
		deferred, fallbacks int64
	}{
		{
			name:  "send_at_local 09:00",
			local: &model.LocalDelivery{At: "2031-12-02T09:00:00"},
			due: map[string]time.Time{
				"Asia/Seoul": day(2, 0), "America/New_York": day(2, 14), "Europe/Berlin": day(2, 8),
				"": day(2, 9), "Not/AZone": day(2, 9), // the default zone, UTC
				"Pacific/Kiritimati": {}, // 09:00 there has passed
			},
			fallbacks: 10,
		},
		{
			name:  "quiet hours 22:00-08:00",
			local: &model.LocalDelivery{QuietHours: &model.QuietHours{Start: "22:00", End: "08:00"}},
			due: map[string]time.Time{
				"Asia/Seoul": {}, "America/New_York": {}, "Pacific/Kiritimati": {}, // outside the window
				"Europe/Berlin": day(2, 7), "": day(2, 8), "Not/AZone": day(2, 8), // inside: at 08:00 local
			},
			deferred: 30, fallbacks: 10,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := *f
			f.t = t
			id := f.submit(model.Audience{All: true, Local: c.local})
			const width = 8
			pi := f.start("a", width, nil)
			pi.finished(t, id)

			// What each instant's chunks hold, in seq order: its targets in
			// id order, cut at the width.
			want := map[time.Time][][]uint64{}
			open := map[time.Time][]uint64{}
			n := 0
			for _, u := range users {
				if !u.target() {
					continue
				}
				at := c.due[u.zone]
				open[at] = append(open[at], u.id)
				n++
			}
			for at, ids := range open {
				for lo := 0; lo < len(ids); lo += width {
					want[at] = append(want[at], ids[lo:min(lo+width, len(ids))])
				}
			}
			got := map[time.Time][][]uint64{}
			chunks := f.chunks(id)
			for i, ch := range chunks {
				status := "pending"
				if !ch.NotBefore.IsZero() {
					status = "waiting"
				}
				if len(ch.IDs) == 0 {
					t.Fatalf("chunk %+v carries no target list", ch)
				}
				if ch.Seq != i || ch.Lo != ch.IDs[0]-1 || ch.Hi != ch.IDs[len(ch.IDs)-1] || ch.Targets != int64(len(ch.IDs)) || ch.Status != status {
					t.Errorf("chunk %+v: want seq %d, (Lo, Hi] around its list, status %s", ch, i, status)
				}
				got[ch.NotBefore] = append(got[ch.NotBefore], ch.IDs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("chunks by instant:\n got %v\nwant %v", got, want)
			}
			p := f.plan(id)
			if p.Planning || p.Targeted != int64(n) || p.Seq != len(chunks) || p.Deferred != c.deferred || p.ZoneFallback != c.fallbacks {
				t.Fatalf("plan %+v: want %d targeted in %d chunks, %d deferred, %d zone fallbacks", p, n, len(chunks), c.deferred, c.fallbacks)
			}
		})
	}
}

// A plan handed back between two steps (its instance stopping) is
// resumed by another instance from the stored cursor, chunk number and
// building chunks, and ends with exactly the chunks an uninterrupted plan
// of the same audience makes.
func TestAPlanHandedBackEndsWithTheChunksOfAnUninterruptedOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	zones := []string{"Asia/Seoul", "America/New_York", "", "Pacific/Kiritimati"}
	users := many(2*planStepRows+5000, zones...)
	f.seed(users)
	local := &model.LocalDelivery{At: "2031-12-02T09:00:00"}
	const width = 4000

	whole := f.submit(model.Audience{All: true, Local: local})
	a := f.start("a", width, nil)
	a.finished(t, whole)
	a.halt(t)

	// b stops right after its first step is stored: the plan goes back
	// with the targets of one step read, in chunks of 4,000 complete and
	// one building per instant.
	resumed := f.submit(model.Audience{All: true, Local: local})
	stepped := make(chan struct{})
	var once sync.Once
	b := f.start("b", width, func(pi *planInstance, _ uint64) {
		once.Do(func() {
			pi.stop()
			close(stepped)
		})
	})
	select {
	case <-stepped:
	case <-time.After(wait):
		t.Fatalf("no plan step within %v", wait)
	}
	b.halt(t)

	ids := targets(users)
	read := map[string]int{} // the first step's targets by zone
	for _, u := range users {
		if u.target() && u.id <= ids[planStepRows-1] {
			read[u.zone]++
		}
	}
	complete, building := 0, 0
	for _, n := range read {
		complete += n / width
		if n%width > 0 {
			building++
		}
	}
	if complete != 4 || building != 4 {
		t.Fatalf("the fixture's first step makes %d complete chunks and %d building: want 4 and 4", complete, building)
	}
	p := f.plan(resumed)
	if !p.Planning || p.Cursor != ids[planStepRows-1] || p.Seq != complete+building || p.Epoch != 1 || p.Targeted != planStepRows {
		t.Fatalf("handed back: %+v, want planning at cursor %d, seq %d, epoch 1, %d targeted", p, ids[planStepRows-1], complete+building, planStepRows)
	}
	stored := map[string]int{}
	for _, c := range f.chunks(resumed) {
		stored[c.Status]++
	}
	if want := map[string]int{"waiting": 3, "pending": 1, "planning": building}; !reflect.DeepEqual(stored, want) {
		t.Fatalf("chunks handed back by status: %v, want %v (Kiritimati's is due now)", stored, want)
	}

	c := f.start("c", width, nil)
	c.finished(t, resumed)
	if got, want := f.chunks(resumed), f.chunks(whole); !reflect.DeepEqual(got, want) {
		t.Fatalf("the resumed plan's chunks differ from the uninterrupted one's: %s", firstDiff(got, want))
	}
	pw, pr := f.plan(whole), f.plan(resumed)
	if pr.Epoch != 2 || pw.Epoch != 1 {
		t.Fatalf("plan epochs %d (resumed) and %d: want 2 (claimed twice) and 1", pr.Epoch, pw.Epoch)
	}
	pr.Epoch = pw.Epoch
	if pr != pw || pw.Planning || pw.Targeted != int64(len(ids)) {
		t.Fatalf("resumed plan %+v, uninterrupted %+v: want the same, planned, %d targeted", pr, pw, len(ids))
	}
}

// A cancel while a plan runs stops it: the step after the cancel is
// fenced off, nothing more is stored, the planner tells the sending side
// neither that it finished nor that it failed, and no instance claims the
// plan again.
func TestACancelMidPlanStopsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, now)
	users := many(2*planStepRows + 5000)
	f.seed(users)
	id := f.submit(model.Audience{All: true})
	const width = 10000

	stepped := make(chan struct{})
	var steps atomic.Int32
	pi := f.start("a", width, func(_ *planInstance, got uint64) {
		if steps.Add(1) == 1 {
			if _, err := f.leases.Stop(f.ctx(), got, ""); err != nil {
				t.Errorf("cancel: %v", err)
			}
			close(stepped)
		}
	})
	select {
	case <-stepped:
	case <-time.After(wait):
		t.Fatalf("no plan step within %v", wait)
	}
	deadline := time.Now().Add(wait)
	for len(pi.p.plans.ids()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the plan still runs %v after its cancel", wait)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if n := steps.Load(); n != 1 {
		t.Fatalf("%d steps stored, want 1 (the one before the cancel)", n)
	}
	select {
	case got := <-pi.runs.finished:
		t.Fatalf("the planner finished broadcast %d", got)
	case msg := <-pi.runs.failed:
		t.Fatalf("the planner failed a plan: %s", msg)
	default:
	}
	ids := targets(users)
	p := f.plan(id)
	if p.Planning || p.Cursor != ids[planStepRows-1] || p.Seq != 2 || p.Targeted != planStepRows || p.Canceled != planStepRows {
		t.Fatalf("plan %+v: want closed at cursor %d after 2 chunks, %d targeted, all canceled", p, ids[planStepRows-1], planStepRows)
	}
	chunks := f.chunks(id)
	if len(chunks) != 2 || chunks[0].Status != "done" || chunks[1].Status != "done" || chunks[1].Hi != ids[planStepRows-1] {
		t.Fatalf("chunks %+v: want the first step's two, closed", chunks)
	}
	if pc, err := f.leases.ClaimPlan(f.ctx(), "b", time.Minute, nil); err != nil || pc != nil {
		t.Fatalf("claim the canceled plan: %+v %v, want none", pc, err)
	}
}
