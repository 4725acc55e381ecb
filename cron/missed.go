package cron

import "time"

// MaxSkipped caps the skipped fires Missed returns. After a long outage of a frequent job
// (a per-second schedule down for a day missed 86,400 fires) only the newest MaxSkipped are
// listed; older ones are neither listed nor enumerated. The work is bounded however long the
// outage: a few times MaxSkipped schedule steps for a regular schedule, and at most about
// 130 × MaxSkipped for a bursty one (say, every second but only from 09:00 to 09:59).
const MaxSkipped = 1000

// Missed decides what to do at start-up about the fires in (last, now]: those after the last
// recorded fire last, up to and including now. A zero last means the job never fired: nothing
// is missed, and the scheduler simply waits for Next(now).
//
// run is the most recent of those fires if now minus it is at most c.Catchup (so with the
// default catchup of 0 only a fire due exactly at now runs); otherwise run is the zero time.
// skipped holds every other missed fire, oldest first, in UTC, capped at MaxSkipped: when more
// were missed, the oldest are dropped, so that skipped always ends with the most recent
// skipped fire. Either run or the last element of skipped is therefore the most recent missed
// fire, which is what the caller should record as the job's last fire.
func (c *Compiled) Missed(last, now time.Time) (run time.Time, skipped []time.Time) {
	if last.IsZero() || !now.After(last) {
		return time.Time{}, nil
	}
	fires := c.newestFires(last, now, MaxSkipped+1)
	if len(fires) == 0 {
		return time.Time{}, nil
	}
	if newest := fires[len(fires)-1]; now.Sub(newest) <= c.Catchup {
		run = newest
		fires = fires[:len(fires)-1]
	}
	if len(fires) > MaxSkipped {
		fires = fires[len(fires)-MaxSkipped:]
	}
	if len(fires) == 0 {
		fires = nil
	}
	return run, fires
}

// maxLookback bounds the doubling search in newestFires (time.Duration tops out at 292 years).
const maxLookback = 100 * 365 * 24 * time.Hour

// newestFires returns the newest k fires in (after, to], oldest first, without enumerating the
// older ones. It doubles a window back from to until the window holds k fires (or reaches
// after); for a regular schedule that window holds fewer than 2k. If it holds more (a bursty
// schedule), it bisects the window's start until it does. Fires are whole-second instants, so
// bisecting to a second always gets there. Then it walks the window keeping the last k.
func (c *Compiled) newestFires(after, to time.Time, k int) []time.Time {
	hi := after // a start whose window (hi, to] holds >= k fires, or after
	lo := to    // a start whose window (lo, to] holds < k fires
	for d := time.Second; ; d *= 2 {
		s := to.Add(-d)
		if d > maxLookback || !s.After(after) {
			break
		}
		if c.countFires(s, to, k) >= k {
			hi = s
			break
		}
		lo = s
	}
	n := c.countFires(hi, to, 2*k)
	for n >= 2*k && lo.Sub(hi) > time.Second {
		mid := hi.Add(lo.Sub(hi) / 2)
		if m := c.countFires(mid, to, 2*k); m >= k {
			hi, n = mid, m
		} else {
			lo = mid
		}
	}

	ring := make([]time.Time, 0, k)
	start := 0 // index of the oldest element once ring is full
	for f := c.step(hi); !f.IsZero() && !f.After(to); f = c.step(f) {
		if len(ring) < k {
			ring = append(ring, f)
			continue
		}
		ring[start] = f
		start = (start + 1) % k
	}
	return append(ring[start:len(ring):len(ring)], ring[:start]...)
}

// countFires counts the fires in (from, to], stopping at limit.
func (c *Compiled) countFires(from, to time.Time, limit int) int {
	n := 0
	for f := c.step(from); n < limit && !f.IsZero() && !f.After(to); f = c.step(f) {
		n++
	}
	return n
}

// step is Next, counted by tests through stepHook.
func (c *Compiled) step(t time.Time) time.Time {
	if c.stepHook != nil {
		c.stepHook()
	}
	return c.Next(t)
}
