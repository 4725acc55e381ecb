// Package campaigns reads the broadcasts as campaigns: grouped by category,
// cron job or analytics label, per day or week in the viewer's time zone
// (Trends), and broken down by device platform, app, locale or A/B
// variant (Breakdown), from the sends per platform and per variant the
// checkpoints count (package lease/sends).
// Read-only, from the counters the checkpoints and the engagement group
// commit keep exact (docs/analytics.md#campaigns).
//
// A broadcast counts in the period it finished (finished_at, in the
// query's zone): its counters are final then. Running, scheduled and held
// broadcasts, dry runs, and broadcasts deleted by retention (whose totals
// only the stats archive keeps, undated) are not in any period.
//
// Cost: one range of idx_broadcasts_finished over [from, to), a primary
// key look-up per broadcast and two of engagement_counts (its key starts
// with broadcast_id); 10,000 broadcasts a year are at most about 11,000
// rows for the longest range allowed (MaxDays), aggregated here. The
// breakdown by platform reads its sends from the same rows (columns), and
// the events per platform of the broadcasts with opens or clicks, and of
// their resends, in batches of IDBatch (platforms.go). The breakdowns by locale and A/B variant read, in batches of IDBatch, the
// broadcasts' per-variant counts and the messages of those that have
// variants (the names the engagement counts' indexes refer to).
package campaigns

import (
	"fmt"
	"time"
)

// Group is what broadcasts are grouped by.
type Group string

// The groups.
const (
	ByCategory Group = "category" // the message category (none: "")
	ByJob      Group = "job"      // the cron job that fired it (none: "")
	ByLabel    Group = "label"    // fcm_options.analytics_label (none: "")
)

// Groups are the valid groups, in the API's order.
var Groups = []Group{ByCategory, ByJob, ByLabel}

// Interval is a trend's period.
type Interval string

// The intervals: a day, and an ISO week (Monday to Sunday), both from
// local midnight in the query's zone.
const (
	Day  Interval = "day"
	Week Interval = "week"
)

// Intervals are the valid intervals.
var Intervals = []Interval{Day, Week}

// Dimension is what a breakdown splits by.
type Dimension string

// The dimensions.
const (
	ByPlatform Dimension = "platform"
	ByApp      Dimension = "app"
	ByLocale   Dimension = "locale"
	ByVariant  Dimension = "variant"
)

// Dimensions are the valid dimensions.
var Dimensions = []Dimension{ByPlatform, ByApp, ByLocale, ByVariant}

// MaxDays is the longest range a query may span: the bound on the rows
// one query reads.
const MaxDays = 400

// IDBatch is how many broadcast ids one IN list of a breakdown holds.
const IDBatch = 1000

// Query selects the broadcasts: finished in [From, To) (local midnights of
// the first day and the day after the last), not dry runs, of Apps (nil:
// every app), and, when Key is set, only those whose Group value is *Key.
type Query struct {
	Group    Group
	From, To time.Time
	Loc      *time.Location
	Interval Interval
	Apps     []string
	Key      *string
}

// ParamError is a bad parameter of a query: the field, a snake_case
// code and a sentence.
type ParamError struct {
	Field, Code, Msg string
}

func (e *ParamError) Error() string { return e.Field + ": " + e.Msg }

// Days returns the instants that bound the days first to last (inclusive,
// dates as in "2006-01-02") in loc: local midnight of first and of the
// day after last.
func Days(first, last string, loc *time.Location) (from, to time.Time, err error) {
	l, err := time.ParseInLocation(time.DateOnly, last, loc)
	if err != nil {
		return time.Time{}, time.Time{}, &ParamError{"to", "invalid_value", fmt.Sprintf("to must be a date (YYYY-MM-DD), got %q", last)}
	}
	f, err := time.ParseInLocation(time.DateOnly, first, loc)
	if err != nil {
		return time.Time{}, time.Time{}, &ParamError{"from", "invalid_value", fmt.Sprintf("from must be a date (YYYY-MM-DD), got %q", first)}
	}
	if l.Before(f) {
		return time.Time{}, time.Time{}, &ParamError{"to", "invalid_range", fmt.Sprintf("to (%s) is before from (%s)", last, first)}
	}
	if n := days(f, l) + 1; n > MaxDays {
		return time.Time{}, time.Time{}, &ParamError{"to", "invalid_range", fmt.Sprintf("the range spans %d days; at most %d are allowed", n, MaxDays)}
	}
	return f, l.AddDate(0, 0, 1), nil
}

// days counts the calendar days from a to b (dates at local midnight),
// right across a DST change.
func days(a, b time.Time) int {
	ua := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	ub := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	return int(ub.Sub(ua).Hours() / 24)
}

// PeriodStart is the start of the period of iv that holds t, in loc:
// local midnight of its day, or of the Monday of its ISO week.
func PeriodStart(t time.Time, iv Interval, loc *time.Location) time.Time {
	l := t.In(loc)
	d := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
	if iv == Week {
		back := (int(d.Weekday()) + 6) % 7 // Monday: 0
		d = time.Date(d.Year(), d.Month(), d.Day()-back, 0, 0, 0, 0, loc)
	}
	return d
}
