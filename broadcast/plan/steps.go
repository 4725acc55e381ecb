package plan

import (
	"context"
	"errors"
	"math"
	"time"

	"pushfan/audience"
	"pushfan/internal/platform/clock"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// runPlan plans pc's broadcast from where its plan stands to its end, or
// until it is canceled (the next step is fenced off), the instance stops
// (the plan is handed back for any instance to resume at once) or it
// fails (handed back, to be retried; after planAttempts failures the
// broadcast fails).
func (s *Planner) runPlan(pc *lease.PlanClaim) {
	ctx := s.in.Running
	bg := context.WithoutCancel(ctx)
	log := s.in.Log.With("broadcast_id", pc.BroadcastID, "plan_epoch", pc.Epoch)
	var b *model.Broadcast
	if err := s.in.RetryDB(ctx, "loading broadcast", func(c context.Context) (err error) {
		b, err = s.store.GetBroadcast(c, pc.BroadcastID)
		return err
	}); err != nil {
		s.planFailed(bg, log, pc, err)
		return
	}
	store, err := s.appStore(b)
	var read planRead
	if err == nil {
		read, err = s.planReader(store, b)
	}
	if err != nil {
		s.refusePlan(bg, log, pc, err)
		return
	}
	if pc.Width == 0 { // the first step fixes the snapshot and the width
		pc.MaxCursor = math.MaxUint64 // a named audience has no snapshot: its SQL decides
		var maxID uint64
		if b.Audience.Name == "" {
			if err := s.in.RetryDB(ctx, "reading the audience snapshot", func(c context.Context) (err error) {
				maxID, err = store.MaxTokenID(c, nil)
				return err
			}); err != nil {
				s.planFailed(bg, log, pc, err)
				return
			}
			pc.MaxCursor = maxID
		}
		pc.Width = s.planWidth(maxID)
	}
	// The users are counted beside the plan (users.go): stored with its
	// last step when in by then, else as soon as they are.
	users := s.countUsers(store, b, pc.MaxCursor, log)
	handed := false
	defer func() {
		if users != nil && !handed {
			users.cancel()
		}
	}()
	first := pc.Cursor == 0 && pc.Seq == 0
	if first {
		log.InfoContext(ctx, "planning broadcast", "max_token_id", pc.MaxCursor, "chunk_width", pc.Width)
	} else {
		log.InfoContext(ctx, "resuming a plan", "cursor", pc.Cursor, "chunks", pc.Seq, "building", len(pc.Building))
	}
	p := newPlanPass(b, pc.Width, s.in.Now(), s.opt.DefaultZone, pc.Cursor, pc.Seq, pc.Building)
	start := time.Now()
	var rested time.Duration // how long the plan yielded to sends (the log says)
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			s.releasePlan(bg, log, pc)
			return
		}
		stepStart, before := time.Now(), s.mark()
		var rows []repository.PlanRow
		var full bool
		// A connection lost or a timeout is retried here; an error in the
		// audience itself (its SQL, a table gone) is a failed attempt.
		if err := s.in.RetryDBUnless(ctx, "reading the audience", repository.IsStatementError, func(c context.Context) (err error) {
			rows, full, err = read(c, pc.Cursor, pc.MaxCursor)
			return err
		}); err != nil {
			if ctx.Err() != nil {
				s.releasePlan(bg, log, pc)
				return
			}
			s.planFailed(bg, log, pc, err)
			return
		}
		for _, r := range rows {
			if err := p.add(r); err != nil {
				s.planFailed(bg, log, pc, err)
				return
			}
		}
		st := p.flush(!full)
		if b.Audience.Name == "" && step == 0 {
			st.MaxCursor, st.Width = pc.MaxCursor, pc.Width // stored once; a replay stores the same
		}
		if st.Done {
			st.UsersTargeted = users.ready()
		}
		err := s.in.RetryDB(bg, "storing a plan step", func(c context.Context) error { return s.leases.CommitStep(c, pc, st, s.in.Lease) })
		switch {
		case errors.Is(err, lease.ErrLost):
			log.InfoContext(ctx, "plan closed (canceled, or taken over by another instance); stopping it", "err", err)
			return
		case err != nil:
			s.planFailed(bg, log, pc, err)
			return
		}
		s.opt.Changed(b.ID)
		if len(st.Chunks) > 0 {
			s.runs.Poke()
		}
		if st.Done {
			if st.UsersTargeted == nil {
				s.storeUsersLater(b.ID, users, log)
				handed = true
			}
			log.InfoContext(ctx, "broadcast planned", "chunks", st.Seq, "targeted", pc.Targeted,
				"took", time.Since(start).Round(time.Millisecond), "rested", rested.Round(time.Millisecond))
			s.runs.Finish(bg, b.ID) // an empty audience ends here
			return
		}
		r0 := time.Now()
		if err := s.rest(ctx, pc, time.Since(stepStart), before, planRestMax-rested); err != nil {
			s.releasePlan(bg, log, pc)
			return
		}
		rested += time.Since(r0)
	}
}

// rest is the pause of a plan between two steps while this instance
// sends and the plan is more than planLead seconds of the budget ahead of
// its broadcast's sends: the next step waits until the sends get the rate
// they ask for, or planYield times the last step's duration at most. A
// plan then uses the headroom the sends leave, all of it on a machine with
// room (the database elsewhere), and at least a tenth of its speed on one
// where the sends take every core; one that nothing sends beside plans at
// full speed.
//
// The sends get their rate when most of their permits wait for the rate
// limit (the CPU and the database have room to spare), or, when every
// send in progress is paced, when they kept their paces (over the step
// itself, else over a probe): a pace, not the plan, holds them back. So a
// paced broadcast's plan (and any plan beside paced sends that keep up)
// never rests: pacing decides when the sends go out, not when the
// audience is counted, and the exact targeted of a broadcast paced at 50/s
// is known as soon as an unpaced one's.
//
// left is what remains of the plan's rests in all (planRestMax, less what
// it rested already): a plan that used it up plans at full speed beside
// any sends, so that an unpaced broadcast's exact targeted comes at most
// planRestMax later than on an idle instance (issue 38: within a minute on
// 10M tokens, whatever the kind).
func (s *Planner) rest(ctx context.Context, pc *lease.PlanClaim, step time.Duration, before loadMark, left time.Duration) error {
	budget := s.opt.RateLimit
	if budget <= 0 {
		budget = 10000
	}
	if left <= 0 || !s.load.Busy() || float64(pc.Targeted-pc.Attempted) <= planLead*budget {
		return nil
	}
	prev := s.mark()
	if pacesKept(before, prev, s.load.Demand()) {
		return nil
	}
	deadline := time.Now().Add(min(planYield*step, left))
	for time.Now().Before(deadline) {
		if err := clock.Sleep(ctx, restProbe); err != nil {
			return err
		}
		cur := s.mark()
		if rateHeld(prev, cur) || pacesKept(prev, cur, s.load.Demand()) {
			return nil
		}
		prev = cur
	}
	return nil
}

// loadMark is the sends' permit counters at one instant.
type loadMark struct {
	at              time.Time
	waited, permits int64
}

func (s *Planner) mark() loadMark {
	w, p := s.load.PermitWaits()
	return loadMark{at: time.Now(), waited: w, permits: p}
}

// rateHeld reports whether most permits given between a and b waited for
// the rate limit: the sends are held by it, not by the CPU.
func rateHeld(a, b loadMark) bool {
	n := b.permits - a.permits
	return n > 0 && float64(b.waited-a.waited) > 0.5*float64(n)
}

// pacesKept reports whether sends that are all paced, asking for demand a
// second (finite: no unpaced send runs), got at least paceKept of it
// between a and b, within paceSlack permits (a pace's limiter hands its
// permits out one by one: a short window at a low rate may hold none).
func pacesKept(a, b loadMark, demand float64) bool {
	if math.IsInf(demand, 1) || math.IsNaN(demand) {
		return false
	}
	want := paceKept*demand*b.at.Sub(a.at).Seconds() - paceSlack
	return float64(b.permits-a.permits) >= want
}

// paceKept and paceSlack: paced sends that got this share of their rate,
// give or take paceSlack permits, kept their paces.
const (
	paceKept  = 0.8
	paceSlack = 2
)

// restProbe is how often a resting plan looks at the sends.
const restProbe = 20 * time.Millisecond

// planRead reads one step of a plan: targets after `after` up to upto, and
// whether the page was full (more may follow).
type planRead func(ctx context.Context, after, upto uint64) (rows []repository.PlanRow, full bool, err error)

// planReader returns how b's audience is read for its plan; an error when
// this instance cannot read it (a named audience its configuration lacks).
func (s *Planner) planReader(store *repository.Store, b *model.Broadcast) (planRead, error) {
	a := b.Audience
	if a.Name == "" {
		var buf []repository.PlanRow
		return func(ctx context.Context, after, upto uint64) ([]repository.PlanRow, bool, error) {
			var err error
			buf, err = store.PlanPage(ctx, nil, a, after, upto, planStepRows, a.Local != nil, buf)
			return buf, len(buf) == planStepRows, err
		}, nil
	}
	bound, err := s.opt.Bind(a)
	if err != nil {
		return nil, err
	}
	if a.Local != nil || store.Schema().ConsentState() {
		return s.namedUsersReader(store, bound, a.Local != nil), nil
	}
	var cursors []uint64
	var buf []repository.PlanRow
	return func(ctx context.Context, after, _ uint64) ([]repository.PlanRow, bool, error) {
		var err error
		if cursors, err = s.opt.Named.Cursors(ctx, bound, after, namedStepRows, cursors); err != nil {
			return nil, false, err
		}
		buf = buf[:0]
		for _, c := range cursors {
			buf = append(buf, repository.PlanRow{ID: c, Consent: repository.ConsentDay | repository.ConsentNight})
		}
		return buf, len(buf) == namedStepRows, nil
	}, nil
}

// namedUsersReader reads a named audience for a plan that needs its
// users: their zones for local time (withZone) and their consent to the
// broadcast's category. Each target's zone is the one its row gives (a
// timezone column), else its user's in the users table (the bundled one
// or the app's mapped schema.users.timezone), read by user id a page at a
// time, as its consent is (repository.Store.UserConsents: the same rule
// as the built-in audiences' SQL, one statement a page, never one a
// target). A user with no zone is on the default zone, as with the
// built-in audiences.
func (s *Planner) namedUsersReader(store *repository.Store, bound audience.Bound, withZone bool) planRead {
	var rows []audience.Row
	var ids []uint64
	var buf []repository.PlanRow
	return func(ctx context.Context, after, _ uint64) ([]repository.PlanRow, bool, error) {
		var err error
		if rows, err = s.opt.Named.Targets(ctx, bound, after, namedStepRows, rows); err != nil {
			return nil, false, err
		}
		var zones map[uint64]string
		if withZone {
			ids = ids[:0]
			for _, r := range rows {
				if !r.HasZone {
					ids = append(ids, r.UserID)
				}
			}
			if zones, err = store.UserZones(ctx, ids); err != nil {
				return nil, false, err
			}
		}
		ids = ids[:0]
		for _, r := range rows {
			ids = append(ids, r.UserID)
		}
		consents, err := store.UserConsents(ctx, ids)
		if err != nil {
			return nil, false, err
		}
		buf = buf[:0]
		for _, r := range rows {
			z, has := r.Zone, r.HasZone
			if !has && withZone {
				z, has = zones[r.UserID]
			}
			buf = append(buf, repository.PlanRow{ID: r.Cursor, Zone: z, HasZone: has, Consent: consents[r.UserID], UserID: r.UserID})
		}
		return buf, len(rows) == namedStepRows, nil
	}
}
