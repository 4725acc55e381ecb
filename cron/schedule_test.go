package cron

import (
	"fmt"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests must not depend on the host's zoneinfo
)

// compileOne compiles a minimal valid job with the given schedule and zone.
func compileOne(t *testing.T, spec, zone string) *Compiled {
	t.Helper()
	cs, err := Compile([]Job{{
		Name: "job", Schedule: spec, Timezone: zone,
		Audience: map[string]any{"all": true}, Message: JobMessage{Title: "hi"},
	}})
	if err != nil {
		t.Fatalf("Compile(%q, %q): %v", spec, zone, err)
	}
	return cs[0]
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// firesOnLocalDate returns every fire whose local date in c.Loc is day ("2006-01-02").
func firesOnLocalDate(t *testing.T, c *Compiled, day string) []time.Time {
	t.Helper()
	d, err := time.Parse("2006-01-02", day)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	f := c.Next(d.Add(-48 * time.Hour)) // well before the local day, in any zone
	for ; !f.IsZero(); f = c.Next(f) {
		if f.Location() != time.UTC {
			t.Fatalf("Next returned %v, not in UTC", f)
		}
		ld := f.In(c.Loc).Format("2006-01-02")
		if ld > day {
			break
		}
		if ld == day {
			out = append(out, f)
		}
	}
	return out
}

// hourly returns the instants start, start+1h, ... (n of them), formatted in loc like the
// table's want entries.
func hourly(start string, n int, loc *time.Location) []string {
	s, err := time.Parse(time.RFC3339, start)
	if err != nil {
		panic(err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = s.Add(time.Duration(i) * time.Hour).In(loc).Format(time.RFC3339)
	}
	return out
}

// TestDSTFireTimes is the table test over the schedule computation. want lists, with their
// local offsets, every fire on the given local date; comparison is by instant.
func TestDSTFireTimes(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	tests := []struct {
		name, zone, spec, day string
		want                  []string
	}{
		// New York, spring-forward 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00Z).
		{"daily 02:30 in the gap fires at the end of the gap", "America/New_York", "30 2 * * *", "2026-03-08",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"daily 02:30 the day before", "America/New_York", "30 2 * * *", "2026-03-07",
			[]string{"2026-03-07T02:30:00-05:00"}},
		{"daily 02:30 the day after", "America/New_York", "30 2 * * *", "2026-03-09",
			[]string{"2026-03-09T02:30:00-04:00"}},
		{"daily 01:30 before the gap is untouched", "America/New_York", "30 1 * * *", "2026-03-08",
			[]string{"2026-03-08T01:30:00-05:00"}},
		{"two times in the gap fire once", "America/New_York", "0,30 2 * * *", "2026-03-08",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"hourly: 23 real hours", "America/New_York", "0 * * * *", "2026-03-08",
			hourly("2026-03-08T00:00:00-05:00", 23, ny)},

		// New York, fall-back 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00Z); 01:xx repeats.
		{"daily 01:30 fires once, at the first 01:30 (EDT)", "America/New_York", "30 1 * * *", "2026-11-01",
			[]string{"2026-11-01T01:30:00-04:00"}},
		{"daily 01:30 the day after", "America/New_York", "30 1 * * *", "2026-11-02",
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"daily 02:30 after the repeat fires once", "America/New_York", "30 2 * * *", "2026-11-01",
			[]string{"2026-11-01T02:30:00-05:00"}},
		{"hourly: 25 real hours, 01:00 twice", "America/New_York", "0 * * * *", "2026-11-01",
			hourly("2026-11-01T00:00:00-04:00", 25, ny)},
		{"every 30 min during 01:xx-02:xx only: the repeated hour does not re-fire", "America/New_York", "0,30 1-2 * * *", "2026-11-01",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T02:30:00-05:00"}},

		// Asia/Seoul has no DST: every Monday 09:00 KST is 00:00Z.
		{"Seoul Monday 09:00", "Asia/Seoul", "0 9 * * MON", "2026-03-09",
			[]string{"2026-03-09T09:00:00+09:00"}},
		{"Seoul Monday job on a Sunday", "Asia/Seoul", "0 9 * * MON", "2026-03-08", nil},
		{"Seoul Monday 09:00 on US fall-back week", "Asia/Seoul", "0 9 * * MON", "2026-11-02",
			[]string{"2026-11-02T00:00:00Z"}},

		// Zones whose transitions differ: the rules hold everywhere.
		{"Berlin spring-forward: 02:30 fires at 03:00 CEST", "Europe/Berlin", "30 2 * * *", "2026-03-29",
			[]string{"2026-03-29T03:00:00+02:00"}},
		{"Berlin fall-back: 02:30 fires at the first, CEST", "Europe/Berlin", "30 2 * * *", "2026-10-25",
			[]string{"2026-10-25T02:30:00+02:00"}},
		{"Havana: midnight does not exist, daily 00:00 fires at 01:00 CDT", "America/Havana", "0 0 * * *", "2026-03-08",
			[]string{"2026-03-08T01:00:00-04:00"}},
		{"Havana: midnight happens twice, fires at the first", "America/Havana", "@midnight", "2026-11-01",
			[]string{"2026-11-01T00:00:00-04:00"}},
		{"Lord Howe: half-hour gap, 02:15 fires at 02:30 +11", "Australia/Lord_Howe", "15 2 * * *", "2026-10-04",
			[]string{"2026-10-04T02:30:00+11:00"}},
		{"Lord Howe: half-hour repeat, 01:45 fires at the first", "Australia/Lord_Howe", "45 1 * * *", "2026-04-05",
			[]string{"2026-04-05T01:45:00+11:00"}},
		{"Santiago: 23:30 repeated at the fall-back fires once", "America/Santiago", "30 23 * * *", "2026-04-04",
			[]string{"2026-04-04T23:30:00-03:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileOne(t, tt.spec, tt.zone)
			got := firesOnLocalDate(t, c, tt.day)
			if len(got) != len(tt.want) {
				t.Fatalf("%s %q on %s: %d fires %v, want %d %v", tt.zone, tt.spec, tt.day, len(got), fmtTimes(got, c.Loc), len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				wt, err := time.Parse(time.RFC3339, w)
				if err != nil {
					t.Fatal(err)
				}
				if !got[i].Equal(wt) {
					t.Errorf("fire %d = %s (%s), want %s", i, got[i].In(c.Loc).Format(time.RFC3339), got[i].Format(time.RFC3339), w)
				}
			}
		})
	}
}

// firstDifference returns the first index where a and b hold different instants, or -1.
func firstDifference(a, b []time.Time) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || !a[i].Equal(b[i]) {
			return i
		}
	}
	return -1
}

func fmtTimes(ts []time.Time, loc *time.Location) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.In(loc).Format("2006-01-02T15:04:05Z07:00")
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestDSTUTCInstants pins the New York answers as UTC instants, the form stored in MySQL.
func TestDSTUTCInstants(t *testing.T) {
	tests := []struct {
		spec, day string
		want      string
	}{
		{"30 2 * * *", "2026-03-08", "2026-03-08T07:00:00Z"},
		{"30 1 * * *", "2026-03-08", "2026-03-08T06:30:00Z"},
		{"30 2 * * *", "2026-11-01", "2026-11-01T07:30:00Z"},
		{"30 1 * * *", "2026-11-01", "2026-11-01T05:30:00Z"},
	}
	for _, tt := range tests {
		c := compileOne(t, tt.spec, "America/New_York")
		got := firesOnLocalDate(t, c, tt.day)
		if len(got) != 1 || got[0].Format(time.RFC3339) != tt.want {
			t.Errorf("%q on %s = %v, want [%s]", tt.spec, tt.day, got, tt.want)
		}
	}
}

// TestRobfigRawDST documents why Next wraps robfig: its own Next, evaluated in New York,
// drops 02:30 on the spring-forward day and fires 01:30 twice on the fall-back day. If a
// robfig upgrade changes this, the wrapper's rationale should be revisited.
func TestRobfigRawDST(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	raw := func(spec, day string) []string {
		s, err := parser.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := time.ParseInLocation("2006-01-02", day, ny)
		var out []string
		for f := s.Next(d.Add(-time.Second)); f.Before(d.AddDate(0, 0, 1)); f = s.Next(f) {
			out = append(out, f.UTC().Format("15:04Z"))
		}
		return out
	}
	if got := raw("30 2 * * *", "2026-03-08"); len(got) != 0 {
		t.Errorf("robfig 02:30 on spring-forward day: %v; expected robfig to skip it", got)
	}
	if got := raw("30 1 * * *", "2026-11-01"); fmt.Sprint(got) != "[05:30Z 06:30Z]" {
		t.Errorf("robfig 01:30 on fall-back day: %v; expected robfig to fire twice", got)
	}
	// And Go's time.Date resolves an ambiguous reading differently by hemisphere (Berlin gets
	// the second occurrence), so the package must not rely on it either.
	berlin := mustLoc(t, "Europe/Berlin")
	if d := time.Date(2026, 10, 25, 2, 30, 0, 0, berlin); d.UTC().Hour() != 1 {
		t.Logf("time.Date now picks %v for Berlin 02:30 on fall-back (was the second occurrence)", d.UTC())
	}
}

// TestSecondsSchedule checks the six-field form: every real second, through both transitions.
func TestSecondsSchedule(t *testing.T) {
	t.Parallel()
	c := compileOne(t, "*/1 * * * * *", "America/New_York")
	if c.kind != kindElapsed {
		t.Fatalf("kind = %v, want elapsed", c.kind)
	}
	for _, tr := range []struct {
		at  string // the transition instant
		day string
		n   int // fires on that local date
	}{
		{"2026-03-08T07:00:00Z", "2026-03-08", 23 * 3600},
		{"2026-11-01T06:00:00Z", "2026-11-01", 25 * 3600},
	} {
		at, _ := time.Parse(time.RFC3339, tr.at)
		got := c.NextN(at.Add(-2*time.Second), 4)
		for i, g := range got {
			if want := at.Add(time.Duration(i-1) * time.Second); !g.Equal(want) {
				t.Errorf("around %s: fire %d = %s, want %s", tr.at, i, g, want)
			}
		}
		d, _ := time.ParseInLocation("2006-01-02", tr.day, c.Loc)
		end := d.AddDate(0, 0, 1)
		n := 0
		for f := c.Next(d.Add(-time.Second)); f.Before(end); f = c.Next(f) {
			n++
		}
		if n != tr.n {
			t.Errorf("%s: %d fires, want %d", tr.day, n, tr.n)
		}
	}

	// Sub-second input: strictly after, on the next whole second.
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if got := c.Next(base); !got.Equal(base.Add(time.Second)) {
		t.Errorf("Next(%s) = %s", base, got)
	}
	if got := c.Next(base.Add(300 * time.Millisecond)); !got.Equal(base.Add(time.Second)) {
		t.Errorf("Next(+300ms) = %s", got)
	}
	// Six fields with a fixed second: 09:00:30 daily.
	c6 := compileOne(t, "30 0 9 * * *", "Asia/Seoul")
	if got := c6.Next(base); got.Format(time.RFC3339) != "2026-05-02T00:00:30Z" {
		t.Errorf("30 0 9 * * * Seoul: Next = %s", got)
	}
}

func TestSeoulWeekly(t *testing.T) {
	c := compileOne(t, "0 9 * * MON", "Asia/Seoul")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := c.NextN(from, 60) // over a year, across both US and EU transitions
	if len(got) != 60 {
		t.Fatalf("got %d fires", len(got))
	}
	if got[0].Format(time.RFC3339) != "2026-01-05T00:00:00Z" {
		t.Errorf("first = %s", got[0])
	}
	for i, g := range got {
		if g.Weekday() != time.Monday || g.Hour() != 0 || g.Minute() != 0 || g.Second() != 0 {
			t.Errorf("fire %d = %s, want Monday 00:00:00Z", i, g)
		}
		if i > 0 && g.Sub(got[i-1]) != 7*24*time.Hour {
			t.Errorf("fire %d is %s after the previous", i, g.Sub(got[i-1]))
		}
	}
}

func TestNextN(t *testing.T) {
	c := compileOne(t, "30 2 * * *", "America/New_York")
	from := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	var got []string
	for _, f := range c.NextN(from, 5) {
		got = append(got, f.Format(time.RFC3339))
	}
	want := []string{
		"2026-03-07T07:30:00Z", // 02:30 EST
		"2026-03-08T07:00:00Z", // 03:00 EDT: 02:30 does not exist
		"2026-03-09T06:30:00Z", // 02:30 EDT
		"2026-03-10T06:30:00Z",
		"2026-03-11T06:30:00Z",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NextN = %v\nwant    %v", got, want)
	}
	if n := c.NextN(from, 0); n != nil {
		t.Errorf("NextN(0) = %v", n)
	}
	// Asking from inside a result continues the sequence: NextN is Next applied n times.
	if again := c.NextN(c.Next(from), 4); again[0].Format(time.RFC3339) != want[1] {
		t.Errorf("NextN from the first fire = %v", again)
	}
	// Next from the end of the gap (03:00 EDT, the moment it fired) moves to the next day.
	if got := c.Next(time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)); got.Format(time.RFC3339) != want[2] {
		t.Errorf("Next(07:00Z) = %s", got)
	}
	// Next from inside the repeated hour of the fall-back skips the repeat.
	c1 := compileOne(t, "30 1 * * *", "America/New_York")
	inRepeat := time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC) // 01:10 EST, after 01:30 EDT fired
	if got := c1.Next(inRepeat); got.Format(time.RFC3339) != "2026-11-02T06:30:00Z" {
		t.Errorf("Next(01:10 EST) = %s, want the next day", got)
	}
	beforeFirst := time.Date(2026, 11, 1, 5, 10, 0, 0, time.UTC) // 01:10 EDT
	if got := c1.Next(beforeFirst); got.Format(time.RFC3339) != "2026-11-01T05:30:00Z" {
		t.Errorf("Next(01:10 EDT) = %s, want 01:30 EDT", got)
	}
}

func TestEveryIsEpochAnchored(t *testing.T) {
	c := compileOne(t, "@every 1h30m", "Asia/Seoul")
	// Two instances starting at different moments within one interval agree on the next fire.
	a := c.Next(time.Date(2026, 5, 1, 10, 31, 3, 500, time.UTC))
	b := c.Next(time.Date(2026, 5, 1, 11, 59, 59, 0, time.UTC))
	if !a.Equal(b) || a.Unix()%5400 != 0 {
		t.Errorf("@every 1h30m: %s and %s, want the same multiple of 90 min since the epoch", a, b)
	}
	if n := c.Next(a); n.Sub(a) != 90*time.Minute {
		t.Errorf("Next(%s) = %s", a, n)
	}
	// Across a DST change the interval is real time.
	ny := compileOne(t, "@every 1h", "America/New_York")
	got := ny.NextN(time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), 3)
	if firstDifference(got, []time.Time{
		time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC),
	}) >= 0 {
		t.Errorf("@every 1h over fall-back = %v", got)
	}
	if c.Next(time.Unix(-1, 0)).Unix() != 0 {
		t.Errorf("before the epoch: %v", c.Next(time.Unix(-1, 0)))
	}
}

func TestDescriptorsAndKinds(t *testing.T) {
	tests := []struct {
		spec string
		kind scheduleKind
	}{
		{"0 * * * *", kindElapsed},
		{"*/15 * * * *", kindElapsed},
		{"0 0-23 * * *", kindElapsed},
		{"@hourly", kindElapsed},
		{"*/1 * * * * *", kindElapsed},
		{"30 2 * * *", kindWallClock},
		{"0 */2 * * *", kindWallClock},
		{"* 2 * * *", kindWallClock},
		{"@daily", kindWallClock},
		{"@every 10m", kindEvery},
	}
	for _, tt := range tests {
		if c := compileOne(t, tt.spec, "UTC"); c.kind != tt.kind {
			t.Errorf("%q: kind %v, want %v", tt.spec, c.kind, tt.kind)
		}
	}
	c := compileOne(t, "@daily", "Asia/Seoul")
	if got := c.Next(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)); got.Format(time.RFC3339) != "2026-05-01T15:00:00Z" {
		t.Errorf("@daily Seoul = %s", got)
	}
	if c.Loc.String() != "Asia/Seoul" {
		t.Errorf("Loc = %v", c.Loc)
	}
	if u := compileOne(t, "@daily", ""); u.Loc != time.UTC {
		t.Errorf("empty timezone: Loc = %v, want UTC", u.Loc)
	}
}

// TestAgainstBruteForce compares Next with a direct, minute-by-minute reading of the rules over
// two days around every 2026 transition of zones with unusual ones: half-hour and 45-minute
// offsets, midnight transitions, southern hemisphere, a negative DST (Casablanca).
//
// The reference: an elapsed-time schedule fires at each minute whose local reading matches; a
// wall-clock schedule fires at the first minute where the clock reaches a new highest reading
// at or past a matching one.
func TestAgainstBruteForce(t *testing.T) {
	t.Parallel()
	zones := []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Havana",
		"Pacific/Chatham", "America/Santiago", "Africa/Casablanca", "Asia/Seoul"}
	specs := []string{"30 2 * * *", "30 1 * * *", "0 * * * *", "*/20 * * * *", "0 0 * * *",
		"15,45 0-3 * * *", "* 2 * * *", "0 */2 * * *", "30 23 * * *"}
	localReading := func(u time.Time, loc *time.Location) time.Time {
		l := u.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
	}
	checked := 0
	for _, zone := range zones {
		loc := mustLoc(t, zone)
		var transitions []time.Time
		u := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		for {
			_, end := u.ZoneBounds()
			if end.IsZero() || end.Year() > 2026 {
				break
			}
			transitions = append(transitions, end)
			u = end
		}
		if len(transitions) == 0 {
			transitions = []time.Time{time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
		}
		for _, spec := range specs {
			c := compileOne(t, spec, zone)
			for _, tr := range transitions {
				from, to := tr.Add(-25*time.Hour), tr.Add(25*time.Hour)
				var want []time.Time
				hw := localReading(from, loc)
				for u := from.Add(time.Minute); u.Before(to); u = u.Add(time.Minute) {
					r := localReading(u, loc)
					switch c.kind {
					case kindElapsed:
						if c.civil.Next(r.Add(-time.Second)).Equal(r) {
							want = append(want, u)
						}
					case kindWallClock:
						if r.After(hw) && !c.civil.Next(hw).After(r) {
							want = append(want, u)
						}
					}
					if r.After(hw) {
						hw = r
					}
				}
				var got []time.Time
				for f := c.Next(from); f.Before(to); f = c.Next(f) {
					got = append(got, f)
				}
				if i := firstDifference(got, want); i >= 0 {
					lo, hi := max(i-3, 0), i+3
					t.Errorf("%s %q around %s: %d fires, want %d; first difference at %d:\n got ...%s\nwant ...%s",
						zone, spec, tr.UTC(), len(got), len(want), i,
						fmtTimes(got[lo:min(hi, len(got))], loc), fmtTimes(want[lo:min(hi, len(want))], loc))
				}
				checked++
			}
		}
	}
	t.Logf("%d zone × schedule × transition windows agree", checked)
}
