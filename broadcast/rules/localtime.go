package rules

import (
	"time"

	"pushfan/broadcast/plan"
	"pushfan/cron"
	"pushfan/model"
)

// EarliestZone is how far ahead of UTC the earliest zone is (UTC+14,
// Line Islands): a send_at_local is first due there.
const EarliestZone = 14 * time.Hour

// Zone is the deployment's default zone (PUSHFAN_DEFAULT_TIMEZONE), UTC
// when unset.
func (r Rules) Zone() *time.Location {
	if r.DefaultZone == nil {
		return time.UTC
	}
	return r.DefaultZone
}

// local checks send_at_local and quiet_hours and returns the local
// delivery to store with the audience; nil when there is none. The quiet
// hours are the request's window if it gives one (whatever its class),
// none if it says false or null, and else the deployment's default, for
// every class but transactional, whatever the audience: a default is for
// campaigns, and a one-user code or receipt must not wait for the
// morning. A named audience's targets get their zones as the built-in
// audiences' do, from the users table by user id, unless the audience
// returns a timezone column. now is the clock for the horizon; a zero now
// (a cron fire, whose own next occurrence is at most a day ahead) skips
// it.
func (r Rules) local(spec Spec, class string, now time.Time) (*model.LocalDelivery, error) {
	qh := spec.QuietHours.Window
	if qh == nil && !spec.QuietHours.Off && r.QuietHours != nil && class != model.ClassTransactional {
		qh = r.QuietHours
	}
	if spec.SendAtLocal == "" && qh == nil {
		return nil, nil
	}
	l := &model.LocalDelivery{At: spec.SendAtLocal}
	if spec.SendAtLocal != "" {
		if spec.SendAt != "" {
			return nil, fieldError("invalid_value", "send_at_local", "send_at_local and send_at exclude each other: send_at is one instant for everyone, send_at_local a wall-clock time in each user's zone")
		}
		w, err := time.Parse(plan.LocalLayout, spec.SendAtLocal)
		if err != nil {
			return nil, fieldError("invalid_value", "send_at_local", "send_at_local must be a wall-clock time with no offset, e.g. 2026-12-02T09:00:00 (each user gets it at that time in their own zone)")
		}
		// w read as UTC, less 14 h, is when the earliest zone is due.
		if !now.IsZero() && w.Add(-EarliestZone).Sub(now) > r.Horizon {
			return nil, fieldError("send_at_too_far", "send_at_local", "send_at_local is due in the earliest zone (UTC+14) more than %v ahead; the limit is PUSHFAN_SCHEDULE_HORIZON", r.Horizon)
		}
	}
	if qh != nil {
		start, err := plan.ClockSeconds(qh.Start)
		if err != nil {
			return nil, fieldError("invalid_value", "quiet_hours.start", "quiet_hours.start must be a time of day HH:MM, got %q", qh.Start)
		}
		end, err := plan.ClockSeconds(qh.End)
		if err != nil {
			return nil, fieldError("invalid_value", "quiet_hours.end", "quiet_hours.end must be a time of day HH:MM, got %q", qh.End)
		}
		if start == end {
			return nil, fieldError("invalid_value", "quiet_hours", "quiet_hours.start and quiet_hours.end are both %s: the window would be empty or the whole day", qh.Start)
		}
		q := *qh
		l.QuietHours = &q
	}
	return l, nil
}

// jobLocal gives a cron fire's spec its job's local time and quiet hours
// (a job's quiet_hours: false or null switches the default off, as a
// request's does). local_time is a time of day: the fire's send_at_local
// is the first such wall-clock time at or after the fire, by the date in
// the job's zone (a job firing at 19:00 for 09:00 sends the next morning).
func jobLocal(spec *Spec, j *cron.Compiled, fire time.Time) error {
	switch {
	case j.NoQuietHours:
		spec.QuietHours = QuietHoursSpec{Off: true}
	case j.QuietHours != nil:
		spec.QuietHours = QuietHoursSpec{Window: &model.QuietHours{Start: j.QuietHours.Start, End: j.QuietHours.End}}
	}
	if j.LocalTime == "" {
		return nil
	}
	sec, err := plan.ClockSeconds(j.LocalTime)
	if err != nil {
		return fieldError("invalid_value", "local_time", "local_time must be a time of day HH:MM, got %q", j.LocalTime)
	}
	loc := j.Loc
	if loc == nil {
		loc = time.UTC
	}
	f := fire.In(loc)
	y, m, d := f.Date()
	at := time.Date(y, m, d, sec/3600, sec%3600/60, sec%60, 0, time.UTC)
	if f.Hour()*3600+f.Minute()*60+f.Second() > sec {
		at = at.AddDate(0, 0, 1)
	}
	spec.SendAtLocal = at.Format(plan.LocalLayout)
	return nil
}
