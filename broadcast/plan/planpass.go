package plan

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"pushfan/lease"
	"pushfan/lease/outcome"
	"pushfan/model"
	"pushfan/repository"
)

// planPass assigns a broadcast's targets, read once in cursor order, to
// chunks of at most width targets each. Every delivery mode is the same
// pass:
//
//   - Sent now (no local time, no quiet hours): one group, cut into
//     contiguous cursor ranges (Lo, Hi] that the chunk pages itself.
//   - Local time or quiet hours: each target's due instant comes from its
//     user's zone (dueAt), and each instant fills chunks of its own, which
//     wait until then. Targets of one instant are spread over the whole
//     audience, so these chunks carry their target lists: membership is
//     fixed here, and a user who changes zone afterwards is in exactly one
//     chunk, sent and counted once.
//   - A resend, or a user_ids audience: their chunks carry their target
//     lists too (the failures, or the users' tokens, are read once, here),
//     so that sending them reads tokens by id rather than the failures or
//     the user list again for every page, across a range of the table that
//     a sparse audience spreads over all of it.
//
// Memory is bounded by the open chunks (one per instant, at most width
// targets each), never by the audience. Between steps, the open chunks are
// stored as building rows (lease.Step), so a takeover resumes the pass.
type planPass struct {
	width int64
	lists bool // chunks carry their target lists (local delivery)
	local *model.LocalDelivery
	now   time.Time
	def   *time.Location

	dues    map[zoneKey]due       // each zone's instant, worked out once
	open    map[int64]*lease.Plan // the chunk being filled per instant (unix ns; 0: due now)
	touched map[int64]bool        // open chunks changed in this step
	seq     int                   // the next chunk number
	cursor  uint64                // every target up to here is assigned
	step    lease.Step            // this step's output so far
}

// zoneKey is a users' zone column value (has is false for NULL), and
// whether they consented to the category inside its night window.
type zoneKey struct {
	name       string
	has, night bool
}

// due is when the users of one zone get the broadcast: at (zero: now),
// moved to the end of their quiet window (deferred) or of the category's
// night window (night), by the default zone when theirs is unknown
// (fallback).
type due struct {
	at                        time.Time
	deferred, night, fallback bool
}

// newPlanPass starts (or, with the stored building chunks, resumes at
// cursor and seq) the pass of b's plan, by the clock now and the default
// zone def.
func newPlanPass(b *model.Broadcast, width uint64, now time.Time, def *time.Location, cursor uint64, seq int, building []lease.Plan) *planPass {
	p := &planPass{
		width: int64(max(width, 1)), local: b.Audience.Local, lists: b.Audience.Local != nil || b.Audience.ResendOf != 0 || len(b.Audience.UserIDs) > 0,
		now: now, def: def, dues: map[zoneKey]due{}, open: map[int64]*lease.Plan{}, touched: map[int64]bool{},
		seq: seq, cursor: cursor,
	}
	for _, c := range building {
		c := c
		var key int64
		if c.NotBefore != nil {
			key = c.NotBefore.UnixNano()
		}
		p.open[key] = &c
	}
	return p
}

// add assigns the target r (its cursor, its user's zone column and
// consent), or leaves it out, counted, when its user has not consented to
// the broadcast's category. Targets come in ascending cursor order.
func (p *planPass) add(r repository.PlanRow) error {
	cursor := r.ID
	switch {
	case cursor == p.cursor && cursor != 0:
		return nil // the same target twice (a resend over two failure rows of one token): one chunk, once
	case cursor <= p.cursor:
		return fmt.Errorf("plan: target %d does not follow %d", cursor, p.cursor)
	}
	if r.Consent&repository.ConsentDay == 0 {
		p.cursor = cursor // in no chunk: a chunk's range that holds it leaves it out by the same rule
		p.step.Excluded++
		p.step.Kept = append(p.step.Kept, lease.TargetOutcome{Cursor: cursor, Kind: outcome.Excluded})
		return nil
	}
	d, err := p.dueOf(zoneKey{r.Zone, r.HasZone, r.Consent&repository.ConsentNight != 0})
	if err != nil {
		return err
	}
	var key int64
	if !d.at.IsZero() {
		key = d.at.UnixNano()
	}
	c := p.open[key]
	if c == nil {
		c = &lease.Plan{Seq: p.seq, Lo: p.cursor}
		if p.lists {
			c.Lo = cursor - 1
		}
		if !d.at.IsZero() {
			at := d.at
			c.NotBefore = &at
		}
		p.seq++
		p.open[key] = c
	}
	if p.lists {
		c.IDs = append(c.IDs, cursor)
	}
	c.Hi = cursor
	c.Targets++
	p.cursor = cursor
	p.step.Added++
	switch {
	case d.night:
		p.step.NightDeferred++
	case d.deferred:
		p.step.Deferred++
	}
	if d.night || d.deferred {
		p.step.Kept = append(p.step.Kept, lease.TargetOutcome{Cursor: cursor, Kind: outcome.Deferred})
	}
	if d.fallback {
		p.step.ZoneFallbacks++
	}
	if c.Targets >= p.width {
		p.step.Chunks = append(p.step.Chunks, *c)
		delete(p.open, key)
		delete(p.touched, key)
	} else {
		p.touched[key] = true
	}
	return nil
}

// dueOf is the instant of the users of zone z.
func (p *planPass) dueOf(z zoneKey) (due, error) {
	if p.local == nil {
		return due{}, nil
	}
	if d, ok := p.dues[z]; ok {
		return d, nil
	}
	loc, fallback := p.def, false
	if z.has && z.name != "" {
		if l, err := loadZone(z.name); err == nil {
			loc = l
		} else {
			fallback = true // counted, and sent by the default zone
		}
	}
	at, deferred, night, err := dueFor(p.local, p.now, loc, z.night)
	if err != nil {
		return due{}, fmt.Errorf("plan local time: %w", err)
	}
	if !at.After(p.now) {
		at = time.Time{} // due now: one group for every zone already due
	}
	d := due{at: at, deferred: deferred, night: night, fallback: fallback}
	p.dues[z] = d
	return d, nil
}

// flush ends a step: the chunks completed in it, the open chunks it
// changed (to be stored as building rows), and its counts. With done (the
// audience is exhausted) every open chunk is complete.
func (p *planPass) flush(done bool) lease.Step {
	st := p.step
	st.Cursor, st.Seq, st.Done = p.cursor, p.seq, done
	keys := slices.Sorted(maps.Keys(p.open))
	for _, k := range keys {
		switch {
		case done:
			st.Chunks = append(st.Chunks, *p.open[k])
		case p.touched[k]:
			st.Building = append(st.Building, *p.open[k])
		}
	}
	if done {
		clear(p.open)
	}
	clear(p.touched)
	p.step = lease.Step{}
	return st
}
