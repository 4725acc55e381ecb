package rules

import (
	"errors"
	"testing"
	"time"

	"pushfan/cron"
	"pushfan/model"
)

func TestLocalRules(t *testing.T) {
	r := Rules{Horizon: 24 * time.Hour, QuietHours: &model.QuietHours{Start: "22:00", End: "08:00"}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// The deployment's quiet hours apply to every bulk broadcast by
	// default, whatever its audience: a named one's zones come from its
	// users (or its own timezone column) as a built-in one's do.
	l, err := r.local(Spec{}, model.ClassBulk, now)
	if err != nil || l == nil || *l.QuietHours != *r.QuietHours {
		t.Fatalf("default quiet hours: %+v %v", l, err)
	}
	l, err = r.local(Spec{SendAtLocal: "2026-12-02T09:00:00"}, model.ClassBulk, now)
	if err != nil || l == nil || l.At != "2026-12-02T09:00:00" || *l.QuietHours != *r.QuietHours {
		t.Fatalf("send_at_local: %+v %v", l, err)
	}
	var fe *FieldError
	// The horizon counts from the earliest zone (UTC+14): 2026-12-03T00:00
	// there is 2026-12-02T10:00Z, 22 h ahead.
	if _, err := r.local(Spec{SendAtLocal: "2026-12-03T00:00:00"}, model.ClassBulk, now); err != nil {
		t.Fatalf("within the horizon in UTC+14: %v", err)
	}
	if _, err := r.local(Spec{SendAtLocal: "2026-12-03T04:00:00"}, model.ClassBulk, now); !errors.As(err, &fe) || fe.Code != "send_at_too_far" {
		t.Fatalf("beyond the horizon: %v", err)
	}
}

func TestJobLocalTime(t *testing.T) {
	r := Rules{Horizon: time.Hour, MaxUserIDs: 10}
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
		in, err := r.JobRequest(job("09:00"), fire)
		if err != nil || in.Audience.Local == nil || in.Audience.Local.At != tc.want || in.Audience.Local.QuietHours.End != "07:00" {
			t.Errorf("fire %s: %+v %v, want send_at_local %s", tc.fire, in.Audience.Local, err, tc.want)
		}
	}
	var fe *FieldError
	if _, err := r.JobRequest(job("9 am"), time.Now()); !errors.As(err, &fe) || fe.Field != "local_time" {
		t.Fatalf("bad local_time: %v", err)
	}
	bad := job("09:00")
	bad.QuietHours.End = "22:00"
	if err := r.CheckJobs([]*cron.Compiled{bad}); !errors.As(err, &fe) || fe.Field != "quiet_hours" {
		t.Fatalf("CheckJobs with an empty quiet window: %v", err)
	}
}
func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
