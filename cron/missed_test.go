package cron

import (
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func withCatchup(t *testing.T, spec, zone string, catchup time.Duration) *Compiled {
	t.Helper()
	c := compileOne(t, spec, zone)
	c.Catchup = catchup
	return c
}

func TestMissed(t *testing.T) {
	daily := "0 9 * * *" // 09:00 UTC
	tests := []struct {
		name        string
		spec, zone  string
		catchup     time.Duration
		last, now   string
		wantRun     string // "" for none
		wantSkipped []string
	}{
		{"within catch-up: the latest missed fire runs", daily, "UTC", time.Hour,
			"2026-01-01T09:00:00Z", "2026-01-02T09:30:00Z", "2026-01-02T09:00:00Z", nil},
		{"exactly at the edge of the window runs", daily, "UTC", time.Hour,
			"2026-01-01T09:00:00Z", "2026-01-02T10:00:00Z", "2026-01-02T09:00:00Z", nil},
		{"beyond catch-up: skipped", daily, "UTC", time.Hour,
			"2026-01-01T09:00:00Z", "2026-01-02T10:00:00.001Z", "", []string{"2026-01-02T09:00:00Z"}},
		{"several missed: latest runs, the others are skipped, oldest first", daily, "UTC", time.Hour,
			"2026-01-01T09:00:00Z", "2026-01-05T09:30:00Z", "2026-01-05T09:00:00Z",
			[]string{"2026-01-02T09:00:00Z", "2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z"}},
		{"several missed beyond catch-up: all skipped", daily, "UTC", time.Hour,
			"2026-01-01T09:00:00Z", "2026-01-05T11:00:00Z", "",
			[]string{"2026-01-02T09:00:00Z", "2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z", "2026-01-05T09:00:00Z"}},
		{"default catch-up 0: nothing runs late", daily, "UTC", 0,
			"2026-01-01T09:00:00Z", "2026-01-02T09:00:01Z", "", []string{"2026-01-02T09:00:00Z"}},
		{"a fire due exactly now runs even with catch-up 0", daily, "UTC", 0,
			"2026-01-01T09:00:00Z", "2026-01-02T09:00:00Z", "2026-01-02T09:00:00Z", nil},
		{"nothing missed", daily, "UTC", time.Hour,
			"2026-01-02T09:00:00Z", "2026-01-03T08:59:59Z", "", nil},
		{"never fired: nothing is missed", daily, "UTC", time.Hour,
			"", "2026-01-05T09:30:00Z", "", nil},
		{"last after now (clock skew): nothing", daily, "UTC", time.Hour,
			"2026-01-05T09:00:00Z", "2026-01-05T08:00:00Z", "", nil},
		{"across fall-back in New York: each day's 01:30 once", "30 1 * * *", "America/New_York", 12 * time.Hour,
			"2026-10-31T05:30:00Z", "2026-11-02T12:00:00Z", "2026-11-02T06:30:00Z",
			[]string{"2026-11-01T05:30:00Z"}},
		{"across spring-forward in New York: the gap's 02:30 is at 03:00 EDT", "30 2 * * *", "America/New_York", 0,
			"2026-03-07T07:30:00Z", "2026-03-09T12:00:00Z", "",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := withCatchup(t, tt.spec, tt.zone, tt.catchup)
			var last time.Time
			if tt.last != "" {
				last = utc(tt.last)
			}
			run, skipped := c.Missed(last, utc(tt.now))
			gotRun := ""
			if !run.IsZero() {
				gotRun = run.Format(time.RFC3339)
				if run.Location() != time.UTC {
					t.Errorf("run %v not in UTC", run)
				}
			}
			if gotRun != tt.wantRun {
				t.Errorf("run = %q, want %q", gotRun, tt.wantRun)
			}
			if len(skipped) != len(tt.wantSkipped) {
				t.Fatalf("skipped = %v, want %v", skipped, tt.wantSkipped)
			}
			for i, w := range tt.wantSkipped {
				if skipped[i].Format(time.RFC3339) != w {
					t.Errorf("skipped[%d] = %s, want %s", i, skipped[i].Format(time.RFC3339), w)
				}
			}
		})
	}
}

// TestMissedMany: a long outage lists only the newest MaxSkipped skipped fires, contiguous
// and ending with the newest, and costs bounded work however long the outage.
func TestMissedMany(t *testing.T) {
	t.Parallel()
	t.Run("per-second job down for 30 days, run within catch-up", func(t *testing.T) {
		c := withCatchup(t, "*/1 * * * * *", "America/New_York", time.Minute)
		now := utc("2026-11-01T06:00:00.5Z") // mid fall-back, for good measure
		run, skipped := c.Missed(now.Add(-30*24*time.Hour), now)
		if want := utc("2026-11-01T06:00:00Z"); !run.Equal(want) {
			t.Errorf("run = %s, want %s", run, want)
		}
		checkContiguous(t, skipped, MaxSkipped, time.Second, utc("2026-11-01T05:59:59Z"))
	})
	t.Run("daily job down for ten years, beyond catch-up", func(t *testing.T) {
		c := withCatchup(t, "0 9 * * *", "Asia/Seoul", time.Hour) // 00:00Z
		now := utc("2026-01-01T03:00:00Z")
		run, skipped := c.Missed(utc("2016-01-01T00:00:00Z"), now)
		if !run.IsZero() {
			t.Errorf("run = %s, want none", run)
		}
		checkContiguous(t, skipped, MaxSkipped, 24*time.Hour, utc("2026-01-01T00:00:00Z"))
	})
	t.Run("exactly MaxSkipped+1 missed: one runs, MaxSkipped skipped", func(t *testing.T) {
		c := withCatchup(t, "0 * * * * *", "UTC", time.Minute) // every minute
		last := utc("2026-01-01T00:00:00Z")
		now := last.Add((MaxSkipped + 1) * time.Minute)
		run, skipped := c.Missed(last, now)
		if !run.Equal(now) {
			t.Errorf("run = %s, want %s", run, now)
		}
		checkContiguous(t, skipped, MaxSkipped, time.Minute, now.Add(-time.Minute))
		if !skipped[0].Equal(last.Add(time.Minute)) {
			t.Errorf("skipped[0] = %s, want the first fire after last", skipped[0])
		}
	})
	t.Run("MaxSkipped+2 missed: the oldest is dropped", func(t *testing.T) {
		c := withCatchup(t, "0 * * * * *", "UTC", 0)
		last := utc("2026-01-01T00:00:00Z")
		now := last.Add((MaxSkipped+2)*time.Minute + time.Second)
		run, skipped := c.Missed(last, now)
		if !run.IsZero() {
			t.Errorf("run = %s", run)
		}
		checkContiguous(t, skipped, MaxSkipped, time.Minute, last.Add((MaxSkipped+2)*time.Minute))
	})
	t.Run("@every since 1970", func(t *testing.T) {
		c := withCatchup(t, "@every 1s", "UTC", 0)
		now := utc("2026-01-01T00:00:00.25Z")
		run, skipped := c.Missed(time.Unix(0, 0), now)
		if !run.IsZero() {
			t.Errorf("run = %s", run)
		}
		checkContiguous(t, skipped, MaxSkipped, time.Second, utc("2026-01-01T00:00:00Z"))
	})
}

func checkContiguous(t *testing.T, ts []time.Time, n int, step time.Duration, newest time.Time) {
	t.Helper()
	if len(ts) != n {
		t.Fatalf("%d fires, want %d", len(ts), n)
	}
	if !ts[n-1].Equal(newest) {
		t.Errorf("newest = %s, want %s", ts[n-1], newest)
	}
	for i := 1; i < n; i++ {
		if d := ts[i].Sub(ts[i-1]); d != step {
			t.Fatalf("fires %d and %d are %s apart, want %s (%s, %s)", i-1, i, d, step, ts[i-1], ts[i])
		}
	}
}

// TestMissedWorkIsBounded counts schedule steps: a year-long outage of a per-second job
// (31.5 million missed fires) is answered in a bounded number of Next calls.
func TestMissedWorkIsBounded(t *testing.T) {
	c := withCatchup(t, "*/1 * * * * *", "UTC", 0)
	steps := 0
	c.stepHook = func() { steps++ }
	now := utc("2026-06-01T00:00:00Z")
	start := time.Now()
	_, skipped := c.Missed(now.Add(-365*24*time.Hour), now)
	if len(skipped) != MaxSkipped {
		t.Fatalf("%d skipped", len(skipped))
	}
	if limit := 5 * (MaxSkipped + 1); steps > limit {
		t.Errorf("%d schedule steps, want at most %d", steps, limit)
	}
	t.Logf("year-long per-second outage: %d schedule steps, %s", steps, time.Since(start))
}

// TestMissedAgainstWalk compares Missed with a plain walk of Next over (last, now] for
// regular, bursty and DST-affected schedules and outages from seconds to months.
func TestMissedAgainstWalk(t *testing.T) {
	t.Parallel()
	specs := []struct{ spec, zone string }{
		{"*/1 * * * * *", "UTC"},
		{"* * 9 * * *", "Asia/Seoul"},      // every second, 09:00-09:59 only: bursty
		{"0 * * * *", "America/New_York"},  // hourly across both transitions
		{"30 2 * * *", "America/New_York"}, // daily in the gap
		{"*/7 1-2 * * *", "Europe/Berlin"}, // bursty around Berlin's transitions
		{"@every 17s", "UTC"},
	}
	now := utc("2026-11-01T06:30:00.5Z") // 01:30:00.5 EST, in New York's repeated hour
	outages := []time.Duration{time.Second, 90 * time.Second, 2 * time.Hour, 26 * time.Hour, 9 * 24 * time.Hour, 240 * 24 * time.Hour}
	maxSteps := 0
	defer func() { t.Logf("at most %d schedule steps per Missed", maxSteps) }()
	for _, s := range specs {
		for _, out := range outages {
			for _, catchup := range []time.Duration{0, time.Hour} {
				c := withCatchup(t, s.spec, s.zone, catchup)
				last := now.Add(-out)
				var all []time.Time
				for f := c.Next(last); !f.After(now) && len(all) <= 40_000; f = c.Next(f) {
					all = append(all, f)
				}
				if len(all) > 40_000 {
					continue // too long to walk here; TestMissedMany covers long outages
				}
				var wantRun time.Time
				if n := len(all); n > 0 && now.Sub(all[n-1]) <= catchup {
					wantRun, all = all[n-1], all[:n-1]
				}
				if len(all) > MaxSkipped {
					all = all[len(all)-MaxSkipped:]
				}
				steps := 0
				c.stepHook = func() { steps++ }
				run, skipped := c.Missed(last, now)
				if !run.Equal(wantRun) || firstDifference(skipped, all) >= 0 {
					t.Errorf("%s %q outage %s catchup %s: run %v skipped %d (first %v), want run %v skipped %d (first %v)",
						s.zone, s.spec, out, catchup, run, len(skipped), first(skipped), wantRun, len(all), first(all))
				}
				if steps > 130*(MaxSkipped+1) {
					t.Errorf("%s %q outage %s: %d steps", s.zone, s.spec, out, steps)
				}
				maxSteps = max(maxSteps, steps)
			}
		}
	}
}

func first(ts []time.Time) time.Time {
	if len(ts) == 0 {
		return time.Time{}
	}
	return ts[0]
}
