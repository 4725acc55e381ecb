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
