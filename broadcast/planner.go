package broadcast

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"pushfan/internal/platform/clock"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// Planning: a submit stores the broadcast and answers; its audience is
// planned after that, in steps of planStepRows targets read in one ordered
// pass (planPass), on any instance. Each step stores the chunks it
// completed at once, so sending starts with the first ones while the rest
// is planned, and a takeover resumes the plan from its stored cursor.
// Only a short user_ids list (planNowUsers) is planned inside the submit
// itself (planNow), so that a one-user transactional send waits for
// nothing.
const (
	// planStepRows is how many targets one plan step reads: a primary-key
	// range of the tokens table, tens of milliseconds on a large table.
	planStepRows = 20000
	// namedStepRows is the same for a named audience, whose pages are its
	// own SQL with all of its columns.
	namedStepRows = 5000
	// planLead is how far ahead of its sends, in seconds of the project's
	// budget, a plan may run at full speed while this instance sends:
	// beyond it, the plan yields (see rest) so as not to take the CPU and
	// the database from the sends it is ahead of.
	planLead = 5
	// planYield bounds a rest: at most this many times as long as the step
	// took (a tenth of the plan's speed, when the sends never leave room).
	planYield = 9
	// planAttempts bounds the failed attempts at planning a broadcast
	// (its audience cannot be read: an error in the deployment's SQL, a
	// table gone) before it ends failed with the reason.
	planAttempts = 5
)

// planNowUsers is the largest user_ids audience planned inside its submit:
// a transactional send (PUSHFAN_TRANSACTIONAL_USERS, 100) waits for no
// planner, and a longer list (up to PUSHFAN_MAX_USER_IDS) answers at once
// like every other audience.
const planNowUsers = 1000

// planNow plans a small user_ids audience inside the submit's
// transaction, or returns nil for one planned after the answer
// (lease.Planner).
func (s *Service) planNow(ctx context.Context, tx *sql.Tx, b *model.Broadcast) (*lease.Step, error) {
	a := b.Audience
	if a.Name != "" || a.ResendOf != 0 || len(a.UserIDs) == 0 || len(a.UserIDs) > planNowUsers {
		return nil, nil
	}
	maxID, err := s.store.MaxTokenID(ctx, tx)
	if err != nil {
		return nil, err
	}
	width := s.planWidth(maxID)
	p := newPlanPass(b, width, s.now(), s.opt.Rules.zone(), 0, 0, nil)
	var rows []repository.PlanRow
	for after := uint64(0); ; {
		if rows, err = s.store.PlanPage(ctx, tx, a, after, maxID, planStepRows, a.Local != nil, rows); err != nil {
			return nil, err
		}
		for _, r := range rows {
			if err := p.add(r.ID, r.Zone, r.HasZone); err != nil {
				return nil, err
			}
		}
		if len(rows) < planStepRows {
			break
		}
		after = rows[len(rows)-1].ID
	}
	st := p.flush(true)
	st.MaxCursor, st.Width = maxID, width
	return &st, nil
}

// planWidth is the targets per chunk of a plan over token ids up to
// maxID: PUSHFAN_CHUNK_WIDTH, wider when PUSHFAN_MAX_CHUNKS chunks could
// not hold every id.
func (s *Service) planWidth(maxID uint64) uint64 {
	w := max(s.opt.ChunkWidth, 1)
	if s.opt.MaxChunks > 0 {
		w = max(w, (maxID+uint64(s.opt.MaxChunks)-1)/uint64(s.opt.MaxChunks))
	}
	return w
}

// planner claims the plans of broadcasts that need planning (this
// instance's submits at once, any instance's when their planner died or
// gave up) and runs each in a goroutine of its own, at most PlanParallel
// at a time (more than one: a plan of millions of targets must not keep a
// small one waiting). It returns when claiming stops.
func (s *Service) planner() {
	if s.opt.PlanParallel <= 0 {
		return // the other instances plan
	}
	idle := time.NewTimer(0)
	defer idle.Stop()
	slots := make(chan struct{}, s.opt.PlanParallel)
	for {
		var pc *lease.PlanClaim
		var err error
		select {
		case slots <- struct{}{}:
			pc, err = s.claimPlan()
			if pc == nil {
				<-slots
			}
		default: // every slot busy: wait for one
		}
		if pc == nil {
			if err != nil && s.claiming.Err() == nil {
				s.log.Warn("claiming a plan failed", "err", err)
			}
			idle.Reset(s.opt.PollInterval)
			select {
			case <-s.claiming.Done():
				return
			case <-s.planWake:
			case <-idle.C:
			}
			continue
		}
		s.plans.add(pc.BroadcastID)
		if !s.group.Go(func() {
			defer func() {
				s.plans.remove(pc.BroadcastID)
				<-slots
				s.wakePlanner()
			}()
			s.runPlan(pc)
		}) {
			s.plans.remove(pc.BroadcastID)
			return // stopping: the plan's lease expires and any instance resumes it
		}
	}
}

func (s *Service) claimPlan() (*lease.PlanClaim, error) {
	ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
	defer cancel()
	return s.leases.ClaimPlan(ctx, s.opt.Owner, s.opt.Lease, append(s.plans.ids(), s.refused.current(s.now())...))
}

// wakePlanner has the planner look for plans at once.
func (s *Service) wakePlanner() {
	select {
	case s.planWake <- struct{}{}:
	default:
	}
}

// runPlan plans pc's broadcast from where its plan stands to its end, or
// until it is canceled (the next step is fenced off), the instance stops
// (the plan is handed back for any instance to resume at once) or it
// fails (handed back, to be retried; after planAttempts failures the
// broadcast fails).
func (s *Service) runPlan(pc *lease.PlanClaim) {
	ctx := s.running
	bg := context.WithoutCancel(ctx)
	log := s.log.With("broadcast_id", pc.BroadcastID, "plan_epoch", pc.Epoch)
	var b *model.Broadcast
	if err := s.retryDB(ctx, "loading broadcast", func(c context.Context) (err error) {
		b, err = s.store.GetBroadcast(c, pc.BroadcastID)
		return err
	}); err != nil {
		s.planFailed(bg, log, pc, err)
		return
	}
	read, err := s.planReader(b)
	if err != nil {
		s.refusePlan(bg, log, pc, err)
		return
	}
	if pc.Width == 0 { // the first step fixes the snapshot and the width
		pc.MaxCursor = math.MaxUint64 // a named audience has no snapshot: its SQL decides
		var maxID uint64
		if b.Audience.Name == "" {
			if err := s.retryDB(ctx, "reading the audience snapshot", func(c context.Context) (err error) {
				maxID, err = s.store.MaxTokenID(c, nil)
				return err
			}); err != nil {
				s.planFailed(bg, log, pc, err)
				return
			}
			pc.MaxCursor = maxID
		}
		pc.Width = s.planWidth(maxID)
	}
	first := pc.Cursor == 0 && pc.Seq == 0
	if first {
		log.InfoContext(ctx, "planning broadcast", "max_token_id", pc.MaxCursor, "chunk_width", pc.Width)
	} else {
		log.InfoContext(ctx, "resuming a plan", "cursor", pc.Cursor, "chunks", pc.Seq, "building", len(pc.Building))
	}
	p := newPlanPass(b, pc.Width, s.now(), s.opt.Rules.zone(), pc.Cursor, pc.Seq, pc.Building)
	start := time.Now()
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			s.releasePlan(bg, log, pc)
			return
		}
		stepStart := time.Now()
		var rows []repository.PlanRow
		var full bool
		// A connection lost or a timeout is retried here; an error in the
		// audience itself (its SQL, a table gone) is a failed attempt.
		if err := s.retryDBUnless(ctx, "reading the audience", repository.IsStatementError, func(c context.Context) (err error) {
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
			if err := p.add(r.ID, r.Zone, r.HasZone); err != nil {
				s.planFailed(bg, log, pc, err)
				return
			}
		}
		st := p.flush(!full)
		if b.Audience.Name == "" && step == 0 {
			st.MaxCursor, st.Width = pc.MaxCursor, pc.Width // stored once; a replay stores the same
		}
		err := s.retryDB(bg, "storing a plan step", func(c context.Context) error { return s.leases.CommitStep(c, pc, st, s.opt.Lease) })
		switch {
		case errors.Is(err, lease.ErrLost):
			log.InfoContext(ctx, "plan closed (canceled, or taken over by another instance); stopping it", "err", err)
			return
		case err != nil:
			s.planFailed(bg, log, pc, err)
			return
		}
		s.reads.forget(b.ID)
		if len(st.Chunks) > 0 {
			s.poke()
		}
		if st.Done {
			log.InfoContext(ctx, "broadcast planned", "chunks", st.Seq, "took", time.Since(start).Round(time.Millisecond))
			s.finishBroadcast(bg, b.ID) // an empty audience ends here
			return
		}
		if err := s.rest(ctx, pc, time.Since(stepStart)); err != nil {
			s.releasePlan(bg, log, pc)
			return
		}
	}
}

// rest is the pause of a plan between two steps while this instance
// sends and the plan is more than planLead seconds of the budget ahead of
// its broadcast's sends: the next step waits until the sends run at their
// rate limit (most permits wait for the rate: the CPU and the database have
// room to spare), or planYield times the last step's duration at most. A
// plan then uses the headroom the sends leave, all of it on a machine with
// room (the database elsewhere), and at least a tenth of its speed on one
// where the sends take every core; one that nothing sends beside plans at
// full speed.
func (s *Service) rest(ctx context.Context, pc *lease.PlanClaim, step time.Duration) error {
	budget := s.opt.Rules.RateLimit
	if budget <= 0 {
		budget = 10000
	}
	if !s.engine.Busy() || float64(pc.Targeted-pc.Attempted) <= planLead*budget {
		return nil
	}
	deadline := time.Now().Add(planYield * step)
	w0, p0 := s.engine.PermitWaits()
	for time.Now().Before(deadline) {
		if err := clock.Sleep(ctx, restProbe); err != nil {
			return err
		}
		w, p := s.engine.PermitWaits()
		if n := p - p0; n > 0 && float64(w-w0) > 0.5*float64(n) {
			return nil // the sends are held by their rate: room for a step
		}
		w0, p0 = w, p
	}
	return nil
}

// restProbe is how often a resting plan looks at the sends.
const restProbe = 20 * time.Millisecond

// planRead reads one step of a plan: targets after `after` up to upto, and
// whether the page was full (more may follow).
type planRead func(ctx context.Context, after, upto uint64) (rows []repository.PlanRow, full bool, err error)

// planReader returns how b's audience is read for its plan; an error when
// this instance cannot read it (a named audience its configuration lacks).
func (s *Service) planReader(b *model.Broadcast) (planRead, error) {
	a := b.Audience
	if a.Name == "" {
		var buf []repository.PlanRow
		return func(ctx context.Context, after, upto uint64) ([]repository.PlanRow, bool, error) {
			var err error
			buf, err = s.store.PlanPage(ctx, nil, a, after, upto, planStepRows, a.Local != nil, buf)
			return buf, len(buf) == planStepRows, err
		}, nil
	}
	bound, err := s.bind(a)
	if err != nil {
		return nil, err
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
			buf = append(buf, repository.PlanRow{ID: c})
		}
		return buf, len(buf) == namedStepRows, nil
	}, nil
}

// releasePlan hands a plan back at once (this instance is stopping).
func (s *Service) releasePlan(ctx context.Context, log logger, pc *lease.PlanClaim) {
	c, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	if _, err := s.leases.ReleasePlan(c, pc, 0, false); err == nil {
		log.InfoContext(ctx, "plan handed back for another instance", "cursor", pc.Cursor)
	}
}

// planFailed records a failed attempt at a plan and hands it back to be
// retried with backoff; past planAttempts the broadcast fails with why.
func (s *Service) planFailed(ctx context.Context, log logger, pc *lease.PlanClaim, why error) {
	base := s.opt.PlanRetry
	if base <= 0 {
		base = time.Second
	}
	retryIn := min(base<<min(pc.Failures, 6), time.Minute)
	var failures int
	if err := s.retryDB(ctx, "recording a failed plan", func(c context.Context) (err error) {
		failures, err = s.leases.ReleasePlan(c, pc, retryIn, true)
		return err
	}); err != nil {
		log.ErrorContext(ctx, "planning failed, and so did handing the plan back; its lease will expire", "err", why, "release_err", err)
		return
	}
	if failures < planAttempts {
		log.WarnContext(ctx, "planning failed; will retry", "err", why, "attempt", failures, "retry_in", retryIn)
		return
	}
	log.ErrorContext(ctx, "planning failed too often: failing the broadcast", "err", why, "attempts", failures)
	s.fail(ctx, pc.BroadcastID, fmt.Sprintf("planning the audience failed %d times: %v", failures, why))
}

// refusePlan hands back a plan this instance cannot run; when no instance
// could for HandBackTimeout, the broadcast fails.
func (s *Service) refusePlan(ctx context.Context, log logger, pc *lease.PlanClaim, why error) {
	s.refuse(pc.BroadcastID)
	var waited time.Duration
	if err := s.retryDB(ctx, "handing a plan back", func(c context.Context) (err error) {
		waited, err = s.leases.RefusePlan(c, pc, refuseFor)
		return err
	}); err != nil {
		if !errors.Is(err, lease.ErrLost) {
			log.ErrorContext(ctx, "handing a plan back failed; its lease will expire", "err", err)
		}
		return
	}
	if waited < s.opt.HandBackTimeout {
		log.WarnContext(ctx, "this instance cannot plan the broadcast; handed back for another", "reason", why.Error(), "unplannable_for", waited.Round(time.Second))
		return
	}
	s.fail(ctx, pc.BroadcastID, fmt.Sprintf("no instance could plan this broadcast for %v: %v", s.opt.HandBackTimeout, why))
}

// fail ends a broadcast failed with msg (unless it ended meanwhile).
func (s *Service) fail(ctx context.Context, id uint64, msg string) {
	if err := s.retryDB(ctx, "failing broadcast", func(c context.Context) error {
		_, err := s.leases.Stop(c, id, msg)
		if errors.Is(err, lease.ErrFinished) {
			return nil
		}
		return err
	}); err != nil {
		s.log.ErrorContext(ctx, "could not fail the broadcast", "broadcast_id", id, "err", err)
		return
	}
	s.reads.forget(id)
	s.finishBroadcast(ctx, id)
}

// logger is what the plan helpers log with.
type logger interface {
	InfoContext(context.Context, string, ...any)
	WarnContext(context.Context, string, ...any)
	ErrorContext(context.Context, string, ...any)
}

// planSet is the plans this instance runs now (never claimed twice here).
type planSet struct {
	mu sync.Mutex
	m  map[uint64]struct{}
}

func (p *planSet) add(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[uint64]struct{}{}
	}
	p.m[id] = struct{}{}
}

func (p *planSet) remove(id uint64) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

func (p *planSet) ids() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]uint64, 0, len(p.m))
	for id := range p.m {
		out = append(out, id)
	}
	return out
}
