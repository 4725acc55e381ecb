package broadcast

import (
	"errors"
	"testing"
	"time"

	"pushfan/cron"
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

func TestLocalRules(t *testing.T) {
	r := Rules{Horizon: 24 * time.Hour, QuietHours: &model.QuietHours{Start: "22:00", End: "08:00"}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// The deployment's quiet hours apply to built-in audiences by default.
	l, err := r.local(Spec{}, model.Audience{All: true}, model.ClassBulk, now)
	if err != nil || l == nil || *l.QuietHours != *r.QuietHours {
		t.Fatalf("default quiet hours: %+v %v", l, err)
	}
	if l, err := r.local(Spec{}, model.Audience{Name: "vip"}, model.ClassBulk, now); err != nil || l != nil {
		t.Fatalf("named audience without local fields: %+v %v", l, err)
	}
	var fe *FieldError
	if _, err := r.local(Spec{SendAtLocal: "2026-12-02T09:00:00"}, model.Audience{Name: "vip"}, model.ClassBulk, now); !errors.As(err, &fe) || fe.Field != "send_at_local" {
		t.Fatalf("named audience with send_at_local: %v", err)
	}
	// The horizon counts from the earliest zone (UTC+14): 2026-12-03T00:00
	// there is 2026-12-02T10:00Z, 22 h ahead.
	if _, err := r.local(Spec{SendAtLocal: "2026-12-03T00:00:00"}, model.Audience{All: true}, model.ClassBulk, now); err != nil {
		t.Fatalf("within the horizon in UTC+14: %v", err)
	}
	if _, err := r.local(Spec{SendAtLocal: "2026-12-03T04:00:00"}, model.Audience{All: true}, model.ClassBulk, now); !errors.As(err, &fe) || fe.Code != "send_at_too_far" {
		t.Fatalf("beyond the horizon: %v", err)
	}
}

func TestJobLocalTime(t *testing.T) {
	s := &Service{opt: Options{Rules: Rules{Horizon: time.Hour, MaxUserIDs: 10}}}
	seoul := mustZone(t, "Asia/Seoul")
	job := func(local string) *cron.Compiled {
		return &cron.Compiled{Loc: seoul, Job: cron.Job{Name: "morning", Audience: map[string]any{"all": true},
			Message: cron.JobMessage{Title: "t"}, LocalTime: local, QuietHours: &cron.JobQuietHours{Start: "22:00", End: "07:00"}}}
	}
	for _, tc := range []struct{ fire, want string }{
		{"2026-12-01T19:00:00+09:00", "2026-12-02T09:00:00"}, // after 09:00 in the job's zone: the next day
		{"2026-12-01T06:00:00+09:00", "2026-12-01T09:00:00"},
		{"2026-12-01T09:00:00+09:00", "2026-12-01T09:00:00"},
	} {
		fire, _ := time.Parse(time.RFC3339, tc.fire)
		in, err := s.jobRequest(job("09:00"), fire)
		if err != nil || in.Audience.Local == nil || in.Audience.Local.At != tc.want || in.Audience.Local.QuietHours.End != "07:00" {
			t.Errorf("fire %s: %+v %v, want send_at_local %s", tc.fire, in.Audience.Local, err, tc.want)
		}
	}
	var fe *FieldError
	if _, err := s.jobRequest(job("9 am"), time.Now()); !errors.As(err, &fe) || fe.Field != "local_time" {
		t.Fatalf("bad local_time: %v", err)
	}
	bad := job("09:00")
	bad.QuietHours.End = "22:00"
	if err := s.CheckJobs([]*cron.Compiled{bad}); !errors.As(err, &fe) || fe.Field != "quiet_hours" {
		t.Fatalf("CheckJobs with an empty quiet window: %v", err)
	}
}
