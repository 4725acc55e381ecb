package broadcast

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"pushfan/lease"
	"pushfan/model"
)

// localLayout is send_at_local's shape: a wall-clock time with no offset,
// read in each user's own zone.
const localLayout = "2006-01-02T15:04:05"

// zoneGroup is the users of one due instant: the zone names (and whether
// users without a zone) whose local send time falls then.
type zoneGroup struct {
	at      time.Time
	filter  model.ZoneFilter
	targets int64
}

// planLocal plans a local-time (or quiet-hours) broadcast over a built-in
// audience: its targets are grouped by their users' zones (one grouped
// scan), each zone gets its due instant (dueAt), and each due instant gets
// its own chunks, which read that group's users only and which the claim
// leaves alone until then (lease.Plan.NotBefore). The chunks' targets are
// counted exactly here, so "waiting" and a cancel of the zones not yet due
// need no further count. It sets b.Deferred and b.ZoneFallbacks, stored
// with the planned broadcast.
func (s *Service) planLocal(ctx context.Context, tx *sql.Tx, b *model.Broadcast) ([]lease.Plan, uint64, error) {
	sc := s.store.Schema()
	zones, err := sc.ZoneCounts(ctx, tx, b.Audience, math.MaxUint64)
	if err != nil {
		return nil, 0, fmt.Errorf("plan local time: %w", err)
	}
	now := s.now()
	def := s.opt.Rules.zone()
	groups := map[int64]*zoneGroup{}
	b.Deferred, b.ZoneFallbacks = 0, 0
	for _, z := range zones {
		loc := def
		if !z.Null && z.Zone != "" {
			if l, err := loadZone(z.Zone); err == nil {
				loc = l
			} else {
				b.ZoneFallbacks += z.Targets // counted, and sent by the default zone
			}
		}
		at, deferred, err := dueAt(b.Audience.Local, now, loc)
		if err != nil {
			return nil, 0, fmt.Errorf("plan local time: %w", err)
		}
		if deferred {
			b.Deferred += z.Targets
		}
		if !at.After(now) {
			at = time.Time{} // due now: one group for every zone already due
		}
		g := groups[at.UnixNano()]
		if g == nil {
			g = &zoneGroup{at: at}
			groups[at.UnixNano()] = g
		}
		if z.Null {
			g.filter.Null = true
		} else {
			g.filter.Names = append(g.filter.Names, z.Zone)
		}
		g.targets += z.Targets
	}
	ordered := make([]*zoneGroup, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	slices.SortFunc(ordered, func(x, y *zoneGroup) int { return x.at.Compare(y.at) })
	var plans []lease.Plan
	var maxID uint64
	for _, g := range ordered {
		slices.Sort(g.filter.Names)
		a := b.Audience
		a.Zones = &g.filter
		ps, hi, err := sc.PlanBuiltin(ctx, tx, a, s.opt.ChunkWidth, s.opt.MaxChunks)
		if err != nil {
			return nil, 0, err
		}
		raw, err := json.Marshal(g.filter)
		if err != nil {
			return nil, 0, fmt.Errorf("plan local time: encode zones: %w", err)
		}
		for i := range ps {
			ps[i].Zones = string(raw)
			if !g.at.IsZero() {
				at := g.at
				ps[i].NotBefore = &at
			}
		}
		plans = append(plans, ps...)
		maxID = max(maxID, hi)
	}
	return plans, maxID, nil
}

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
		w, err := time.Parse(localLayout, l.At)
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
	start, err := clockSeconds(l.QuietHours.Start)
	if err != nil {
		return at, false, fmt.Errorf("quiet_hours.start: %w", err)
	}
	end, err := clockSeconds(l.QuietHours.End)
	if err != nil {
		return at, false, fmt.Errorf("quiet_hours.end: %w", err)
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

// clockSeconds reads "HH:MM" or "HH:MM:SS" as seconds after midnight.
func clockSeconds(s string) (int, error) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Hour()*3600 + t.Minute()*60 + t.Second(), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day HH:MM (or HH:MM:SS)", s)
}

// zoneFilter decodes a chunk's zone group (lease.Plan.Zones); nil for a
// chunk that reads every zone.
func zoneFilter(raw string) (*model.ZoneFilter, error) {
	if raw == "" {
		return nil, nil
	}
	var z model.ZoneFilter
	if err := json.Unmarshal([]byte(raw), &z); err != nil {
		return nil, fmt.Errorf("chunk zones %q: %w", raw, err)
	}
	return &z, nil
}
