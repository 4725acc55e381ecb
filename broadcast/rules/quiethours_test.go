package rules

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"pushfan/cron"
	"pushfan/model"
)

// quietRules has the deployment's default quiet hours set.
func quietRules() Rules {
	r := rules
	r.QuietHours = &model.QuietHours{Start: "22:00", End: "08:00"}
	return r
}

// The default quiet hours apply to a bulk broadcast of a built-in
// audience, never to a transactional one (by its size or by its class);
// a window the request gives applies whatever the class.
func TestDefaultQuietHoursByClass(t *testing.T) {
	r := quietRules()
	window := &model.QuietHours{Start: "21:00", End: "07:00"}
	for _, tc := range []struct {
		name string
		spec Spec
		want *model.QuietHours // nil: no local delivery at all
	}{
		{"one user: transactional, no default", Spec{Audience: users(1)}, nil},
		{"class transactional on all: no default", Spec{Audience: &AudienceSpec{All: true}, Class: model.ClassTransactional}, nil},
		{"one user, class bulk: the default", Spec{Audience: users(1), Class: model.ClassBulk}, r.QuietHours},
		{"more users than transactional: the default", Spec{Audience: users(101)}, r.QuietHours},
		{"all: the default", Spec{Audience: &AudienceSpec{All: true}}, r.QuietHours},
		{"transactional with its own window: the window", Spec{Audience: users(1), QuietHours: QuietHoursSpec{Window: window}}, window},
		{"all, switched off: none", Spec{Audience: &AudienceSpec{All: true}, QuietHours: QuietHoursSpec{Off: true}}, nil},
		{"one user, class bulk, switched off: none", Spec{Audience: users(1), Class: model.ClassBulk, QuietHours: QuietHoursSpec{Off: true}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Title = "t"
			in, err := r.Validate(tc.spec, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := in.Audience.Local
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("local delivery %+v (quiet hours %+v), want none", got, got.QuietHours)
			case tc.want != nil && (got == nil || got.QuietHours == nil || *got.QuietHours != *tc.want):
				t.Fatalf("local delivery %+v, want quiet hours %+v", got, *tc.want)
			}
		})
	}
	// A named audience takes the default and a window of its own as a
	// built-in one does.
	named := &AudienceSpec{Name: "vip"}
	if l, err := r.local(Spec{Audience: named}, model.ClassBulk, time.Now()); err != nil || l == nil || *l.QuietHours != *r.QuietHours {
		t.Fatalf("named audience, the default: %+v %v", l, err)
	}
	if l, err := r.local(Spec{Audience: named, QuietHours: QuietHoursSpec{Off: true}}, model.ClassBulk, time.Now()); err != nil || l != nil {
		t.Fatalf("named audience, quiet hours off: %+v %v", l, err)
	}
}

// quiet_hours decodes from an object, false or null; left out is the
// zero value (the default applies); any other type is a type error on the
// field, and the object is as strict as the request.
func TestQuietHoursSpecJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		want QuietHoursSpec
	}{
		{`{}`, QuietHoursSpec{}},
		{`{"quiet_hours": null}`, QuietHoursSpec{Off: true}},
		{`{"quiet_hours": false}`, QuietHoursSpec{Off: true}},
		{`{"quiet_hours": {"start": "22:00", "end": "08:00"}}`, QuietHoursSpec{Window: &model.QuietHours{Start: "22:00", End: "08:00"}}},
	} {
		var s Spec
		if err := json.Unmarshal([]byte(tc.body), &s); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if s.QuietHours.Off != tc.want.Off || (s.QuietHours.Window == nil) != (tc.want.Window == nil) ||
			(s.QuietHours.Window != nil && *s.QuietHours.Window != *tc.want.Window) {
			t.Errorf("%s: %+v, want %+v", tc.body, s.QuietHours, tc.want)
		}
	}
	for _, tc := range []struct{ body, field, value string }{
		{`{"quiet_hours": true}`, "quiet_hours", "true"},
		{`{"quiet_hours": "22:00-08:00"}`, "quiet_hours", "string"},
		{`{"quiet_hours": 0}`, "quiet_hours", "number"},
		{`{"quiet_hours": []}`, "quiet_hours", "array"},
		{`{"quiet_hours": {"start": 22}}`, "quiet_hours.start", "number"},
	} {
		var s Spec
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal([]byte(tc.body), &s); !errors.As(err, &te) || te.Field != tc.field || te.Value != tc.value {
			t.Errorf("%s: %v, want a type error on %s, got %s", tc.body, err, tc.field, tc.value)
		}
	}
	var s Spec
	if err := json.Unmarshal([]byte(`{"quiet_hours": {"start": "22:00", "end": "08:00", "stop": "x"}}`), &s); err == nil {
		t.Error("an unknown key inside quiet_hours was accepted")
	}
}

// A job's quiet_hours: false switches the default off as a request's
// does; a job without it gets the default.
func TestJobQuietHoursOff(t *testing.T) {
	r := quietRules()
	job := &cron.Compiled{Loc: time.UTC, Job: cron.Job{Name: "digest", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "t"}}}
	in, err := r.JobRequest(job, time.Now())
	if err != nil || in.Audience.Local == nil || in.Audience.Local.QuietHours == nil || *in.Audience.Local.QuietHours != *r.QuietHours {
		t.Fatalf("a job without quiet_hours: %+v %v, want the default", in.Audience.Local, err)
	}
	job.NoQuietHours = true
	if in, err := r.JobRequest(job, time.Now()); err != nil || in.Audience.Local != nil {
		t.Fatalf("a job with quiet_hours: false: %+v %v, want none", in.Audience.Local, err)
	}
}
