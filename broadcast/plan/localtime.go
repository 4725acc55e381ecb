package plan

import (
	"fmt"
	"time"

	"pushfan/model"
)

// LocalLayout is send_at_local's shape: a wall-clock time with no offset,
// read in each user's own zone.
const LocalLayout = "2006-01-02T15:04:05"

// loadZone loads an IANA zone by name. "Local" (the server's zone) and ""
// are no user's zone: they count as unknown.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("zone %q is not an IANA zone name", name)
	}
	return time.LoadLocation(name)
}

// dueAt is when a user in loc gets the broadcast: at the local wall-clock
// time l.At in loc (now when that has passed or l.At is empty), moved to
// the end of the quiet window when it falls inside it (deferred). Wall
// times that do not exist or repeat across a DST change are resolved as
// time.Date does, which is fine for a send time: a time in a spring-forward
// gap is read with the offset after the change (02:30 in New York on the
// change day is 06:30 UTC), a repeated one gets one of its two instants.
func dueAt(l *model.LocalDelivery, now time.Time, loc *time.Location) (at time.Time, deferred bool, err error) {
	at = now
	if l == nil {
		return at, false, nil
	}
	if l.At != "" {
		w, err := time.Parse(LocalLayout, l.At)
		if err != nil {
			return at, false, fmt.Errorf("send_at_local %q: %w", l.At, err)
		}
		w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
		if w.After(now) {
			at = w
		}
	}
	if l.QuietHours == nil {
		return at, false, nil
	}
	e, inside, err := windowEnd(*l.QuietHours, at, loc, "quiet_hours")
	if err != nil || !inside {
		return at, false, err
	}
	return e, true, nil
}

// dueFor is dueAt for a user with or without night consent: one without
// it whose time falls inside the category's night window (l.Night) waits
// for the window's end in their zone, and that end may itself fall in the
// quiet hours, which then move it on (night: the night window moved it).
func dueFor(l *model.LocalDelivery, now time.Time, loc *time.Location, nightOK bool) (at time.Time, deferred, night bool, err error) {
	at, deferred, err = dueAt(l, now, loc)
	if err != nil || l == nil || l.Night == nil || nightOK {
		return at, deferred, false, err
	}
	// Two windows can hand a time to each other at most once each way
	// before it is outside both (each end is outside its own window).
	for range 2 {
		e, inside, err := windowEnd(*l.Night, at, loc, "night")
		if err != nil || !inside {
			return at, deferred, night, err
		}
		at, night = e, true
		if l.QuietHours == nil {
			return at, deferred, night, nil
		}
		e, inside, err = windowEnd(*l.QuietHours, at, loc, "quiet_hours")
		if err != nil || !inside {
			return at, deferred, night, err
		}
		at, deferred = e, true
	}
	return at, deferred, night, nil
}

// windowEnd reports whether at is inside the daily window w in loc, and
// if so the window's end (the first one after at).
func windowEnd(w model.QuietHours, at time.Time, loc *time.Location, name string) (time.Time, bool, error) {
	start, err := ClockSeconds(w.Start)
	if err != nil {
		return at, false, fmt.Errorf("%s.start: %w", name, err)
	}
	end, err := ClockSeconds(w.End)
	if err != nil {
		return at, false, fmt.Errorf("%s.end: %w", name, err)
	}
	t := at.In(loc)
	sec := t.Hour()*3600 + t.Minute()*60 + t.Second()
	inside := start <= sec && sec < end
	if start > end { // wraps past midnight
		inside = sec >= start || sec < end
	}
	if !inside {
		return at, false, nil
	}
	y, m, d := t.Date()
	e := time.Date(y, m, d, end/3600, end%3600/60, end%60, 0, loc)
	if !e.After(t) {
		e = time.Date(y, m, d+1, end/3600, end%3600/60, end%60, 0, loc)
	}
	return e, true, nil
}

// ClockSeconds reads "HH:MM" or "HH:MM:SS" as seconds after midnight.
func ClockSeconds(s string) (int, error) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Hour()*3600 + t.Minute()*60 + t.Second(), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day HH:MM (or HH:MM:SS)", s)
}
