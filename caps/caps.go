package caps

import (
	"fmt"
	"time"

	"pushfan/config"
	"pushfan/model"
)

// Set is the caps one broadcast is sent under; the zero Set caps nothing.
type Set struct {
	caps []config.FrequencyCap
}

// Parse reads a broadcast's recorded caps ("1/2h,3/day"; "" for none).
func Parse(spec string) (Set, error) {
	caps, err := config.ParseFrequencyCaps(spec)
	if err != nil {
		return Set{}, fmt.Errorf("frequency cap: %w", err)
	}
	return Set{caps: caps}, nil
}

// Empty reports a set that caps nothing.
func (s Set) Empty() bool { return len(s.caps) == 0 }

// String is the set in the canonical form Parse reads.
func (s Set) String() string { return config.FormatFrequencyCaps(s.caps) }

// Daily reports whether a cap counts the users' local days (Reserve then
// needs their zones).
func (s Set) Daily() bool {
	for _, c := range s.caps {
		if c.Day {
			return true
		}
	}
	return false
}

// window is a cap's key in the ledger: its window only, so that caps of
// different counts over one window count the same sends, and its app's
// name for an app other than the default one (ForApp).
func window(c config.FrequencyCap) string {
	key := c.Per.String()
	if c.Day {
		key = "day"
	}
	if c.App != "" && c.App != model.DefaultApp {
		key = c.App + "/" + key
	}
	return key
}

// ForApp is the set counting app's sends only: a cap counts per app, since
// apps with tables of their own number their users independently, and the
// same id in two apps may be two people (docs/apps.md).
func (s Set) ForApp(app string) Set {
	out := Set{caps: make([]config.FrequencyCap, len(s.caps))}
	for i, c := range s.caps {
		c.App = app
		out.caps[i] = c
	}
	return out
}

// expires is when a slot of c taken at now by a user in loc is free
// again: the user's next local midnight for a daily cap (time.Date
// normalizes a day that has no midnight, a zone that springs forward at
// 00:00), now plus the window for a rolling one.
func expires(c config.FrequencyCap, now time.Time, loc *time.Location) time.Time {
	if !c.Day {
		return now.Add(c.Per)
	}
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// Window is one cap of a set as the ledger keys it: its window's key
// and its count of slots.
type Window struct {
	Key string
	Max int
}

// Windows lists the set's caps as the ledger keys them (for a count of
// the users they would withhold, repository.CountCappedUsers).
func (s Set) Windows() []Window {
	out := make([]Window, len(s.caps))
	for i, c := range s.caps {
		out[i] = Window{Key: window(c), Max: c.Max}
	}
	return out
}
