package cron

import "time"

// Local wall-clock readings ("civil" times) are represented as time.Time values in UTC whose
// fields are the reading: 2026-03-08 02:30 in New York is time.Date(2026, 3, 8, 2, 30, 0, 0, UTC).
// robfig's SpecSchedule.Next evaluated in UTC, where no DST exists, is then exact calendar
// matching: the first matching reading strictly after a reading, at whole seconds.

// maxPeriods bounds the walk over a zone's offset periods (two a year with DST; robfig gives
// up after five years anyway).
const maxPeriods = 64

// Next returns the first fire time strictly after t, in UTC, evaluating the schedule in c.Loc
// with the DST rules described in the package documentation. It returns the zero time if the
// schedule does not fire within five years of t.
func (c *Compiled) Next(t time.Time) time.Time {
	switch c.kind {
	case kindEvery:
		return nextEvery(t, c.every)
	case kindElapsed:
		return c.nextElapsed(t)
	default:
		return c.nextWallClock(t)
	}
}

// NextN returns the next n fire times strictly after t, in UTC, oldest first (GET /push/cron
// shows five). It returns fewer if the schedule stops firing.
func (c *Compiled) NextN(t time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// wall returns the local clock reading at instant u in loc, as a civil time.
func wall(u time.Time, loc *time.Location) time.Time {
	_, off := u.In(loc).Zone()
	return u.Add(time.Duration(off) * time.Second).UTC()
}

// period returns the UTC offset in effect at u and the instant it ends (zero if never).
func period(u time.Time, loc *time.Location) (off time.Duration, end time.Time) {
	l := u.In(loc)
	_, secs := l.Zone()
	_, end = l.ZoneBounds()
	return time.Duration(secs) * time.Second, end
}

// nextElapsed: the first instant u > t whose local reading matches. Within one offset period
// the reading is u+off, so the answer there is the first matching reading after the period's
// lower bound, minus off, if that falls before the period ends; otherwise try the next period.
// A fall-back's repeated readings therefore match again; a spring-forward's missing ones never.
func (c *Compiled) nextElapsed(t time.Time) time.Time {
	lb := t
	for i := 0; i < maxPeriods; i++ {
		off, end := period(lb, c.Loc)
		from := wall(t, c.Loc) // strictly after t's own reading
		if i > 0 {
			from = wall(lb, c.Loc).Add(-time.Nanosecond) // the period's first instant is eligible
		}
		w := c.civil.Next(from)
		if w.IsZero() {
			return time.Time{}
		}
		if inst := w.Add(-off); end.IsZero() || inst.Before(end) {
			return inst.UTC()
		}
		lb = end
	}
	return time.Time{}
}

// nextWallClock: each matching reading W fires once, at the first instant the clock reads W or
// later. That instant is after t exactly when W is greater than every reading the clock has
// shown up to t (highWater), so: take the first matching W above the high-water mark, then find
// the first instant after t whose reading is >= W. Inside a period that is W-off; if W lies in
// a spring-forward gap, it is the first instant of the next period.
func (c *Compiled) nextWallClock(t time.Time) time.Time {
	w := c.civil.Next(c.highWater(t))
	if w.IsZero() {
		return time.Time{}
	}
	lb := t
	for i := 0; i < maxPeriods; i++ {
		off, end := period(lb, c.Loc)
		if i > 0 && !wall(lb, c.Loc).Before(w) {
			return lb.UTC() // the clock jumped over W: fire at the end of the gap
		}
		if inst := w.Add(-off); end.IsZero() || inst.Before(end) {
			return inst.UTC()
		}
		lb = end
	}
	return time.Time{}
}

// highWater returns the highest local reading shown at or before t: t's own, or, during the
// hour a fall-back repeats, the reading just before the clock was set back. Only transitions
// within 48 hours of t can matter (no zone has ever set its clock back by more than a day).
func (c *Compiled) highWater(t time.Time) time.Time {
	m := wall(t, c.Loc)
	cur := t
	for i := 0; i < 8; i++ {
		start, _ := cur.In(c.Loc).ZoneBounds()
		if start.IsZero() || t.Sub(start) > 48*time.Hour {
			break
		}
		prev := start.Add(-time.Nanosecond)
		if r := wall(prev, c.Loc); r.After(m) {
			m = r
		}
		cur = prev
	}
	return m
}

// nextEvery returns the first multiple of d since the Unix epoch strictly after t, so that
// every instance computes the same fire times whenever it started.
func nextEvery(t time.Time, d time.Duration) time.Time {
	step := int64(d / time.Second)
	s := t.Unix() // floor: nanoseconds are dropped
	q := s / step
	if s%step < 0 {
		q--
	}
	return time.Unix((q+1)*step, 0).UTC()
}
