package plan

import (
	"testing"
	"time"

	"pushfan/model"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDueAt(t *testing.T) {
	seoul, ny := mustZone(t, "Asia/Seoul"), mustZone(t, "America/New_York")
	now := time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC) // 08:30 Dec 2 in Seoul, 18:30 Dec 1 in New York
	at := &model.LocalDelivery{At: "2026-12-02T09:00:00"}
	quiet := &model.QuietHours{Start: "22:00", End: "08:00"}
	for _, tc := range []struct {
		name     string
		l        *model.LocalDelivery
		loc      *time.Location
		want     time.Time
		deferred bool
	}{
		{"seoul soon", at, seoul, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), false},
		{"new york next day", at, ny, time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), false},
		{"passed: now", &model.LocalDelivery{At: "2026-12-01T09:00:00"}, seoul, now, false},
		{"now, outside quiet hours", &model.LocalDelivery{QuietHours: quiet}, seoul, now, false},
		{"now, inside quiet hours: the window's end", &model.LocalDelivery{QuietHours: &model.QuietHours{Start: "08:00", End: "09:15"}}, seoul,
			time.Date(2026, 12, 2, 0, 15, 0, 0, time.UTC), true},
		{"wrapping window, after midnight", &model.LocalDelivery{QuietHours: quiet}, time.UTC, time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), true},
		{"local time inside the window", &model.LocalDelivery{At: "2026-12-02T23:00:00", QuietHours: quiet}, seoul,
			time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC), true}, // 08:00 Dec 3 in Seoul
	} {
		got, deferred, err := dueAt(tc.l, now, tc.loc)
		if err != nil || !got.Equal(tc.want) || deferred != tc.deferred {
			t.Errorf("%s: %v deferred=%v err=%v, want %v deferred=%v", tc.name, got.UTC(), deferred, err, tc.want, tc.deferred)
		}
	}
	// DST: 02:30 does not exist in New York on 2026-03-08; time.Date reads
	// it with the offset after the change (EDT, -4), 06:30 UTC.
	got, _, err := dueAt(&model.LocalDelivery{At: "2026-03-08T02:30:00"}, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), ny)
	if err != nil || !got.Equal(time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)) {
		t.Errorf("DST gap: %v %v", got.UTC(), err)
	}
}

// The category's night window (Korea's 21:00–08:00): a user without night
// consent whose time falls inside it waits for its end in their zone, and
// that end may fall in the quiet hours, which move it on; a user with
// night consent, or outside the window, is not moved.
func TestDueForTheNightWindow(t *testing.T) {
	seoul := mustZone(t, "Asia/Seoul")
	kst := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, seoul) }
	night := &model.QuietHours{Start: "21:00", End: "08:00"}
	now := kst(1, 23, 0)
	for _, tc := range []struct {
		name            string
		l               *model.LocalDelivery
		now             time.Time
		nightOK         bool
		want            time.Time
		deferred, moved bool
	}{
		{"inside, without night consent", &model.LocalDelivery{Night: night}, now, false, kst(2, 8, 0), false, true},
		{"inside, with night consent", &model.LocalDelivery{Night: night}, now, true, now, false, false},
		{"outside", &model.LocalDelivery{Night: night}, kst(1, 12, 0), false, kst(1, 12, 0), false, false},
		{"just after midnight", &model.LocalDelivery{Night: night}, kst(2, 0, 30), false, kst(2, 8, 0), false, true},
		{"the window's end", &model.LocalDelivery{Night: night}, kst(2, 8, 0), false, kst(2, 8, 0), false, false},
		{"a send_at_local inside it", &model.LocalDelivery{At: "2026-12-02T06:00:00", Night: night}, kst(1, 12, 0), false, kst(2, 8, 0), false, true},
		{"its end in the quiet hours", &model.LocalDelivery{Night: night, QuietHours: &model.QuietHours{Start: "07:30", End: "09:00"}}, now, false, kst(2, 9, 0), true, true},
		{"quiet hours first, then the night", &model.LocalDelivery{Night: &model.QuietHours{Start: "21:00", End: "10:00"}, QuietHours: &model.QuietHours{Start: "22:00", End: "08:00"}}, now, false, kst(2, 10, 0), true, true},
		{"quiet hours and night consent", &model.LocalDelivery{Night: night, QuietHours: &model.QuietHours{Start: "22:00", End: "07:00"}}, now, true, kst(2, 7, 0), true, false},
	} {
		at, deferred, moved, err := dueFor(tc.l, tc.now, seoul, tc.nightOK)
		if err != nil || !at.Equal(tc.want) || deferred != tc.deferred || moved != tc.moved {
			t.Errorf("%s: %v deferred %v night %v (%v), want %v %v %v", tc.name, at.In(seoul), deferred, moved, err, tc.want, tc.deferred, tc.moved)
		}
	}
}
