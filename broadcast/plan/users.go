package plan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

// A broadcast's users_targeted is how many users hold its targeted
// tokens, each once: a user's tokens are spread over the plan's chunks
// (they are in token id order, not by user), so the plan's ordered pass
// cannot count them, and a count kept in memory across steps would not
// survive a takeover. The plan's first run counts them beside it instead,
// in one statement over the plan's own predicates and snapshot
// (repository.CountBroadcastUsers, the preview's count bounded by the
// snapshot), or a walk of a named audience's rows with the plan's own
// reader (usersWalkMax rows at most).
//
// The count starts with the plan's run, before its first step is stored,
// and never delays a step. A token the broadcast's own sends marked dead
// counts as live (its failure row says the broadcast sent to it), so a
// count that starts after sends began (a takeover's, the sweep's) counts
// what the plan counted; only tokens dead or unregistered by other means
// since the plan read them can make it smaller. The plan's last step
// stores it when it is in (with the plan's end: one transaction), else it
// is stored as soon as it comes (lease.SetUsersTargeted).
//
// The row says a count began (users_count_at, repository.ClaimUsersCount)
// and why one failed for good (users_count_error): a resumed plan (a
// hand-back, a takeover, a restart) counts again only when the count
// begun before it is older than usersLate; else the sweep (recountLate)
// counts one that was lost, after the plan's end. A count that fails for
// good (the server's time limit, an error in a named audience's SQL, a
// named audience above usersWalkMax rows) is recorded and never run
// again by any instance: users_targeted stays null and the console says
// "users not counted" with the reason. One that fails on a lost
// connection (usersAttempts attempts) is left to the sweep.

// usersBudget is the database timeouts one attempt at a count may take:
// a scan of the audience, as a preview's count is (reads). The server
// itself stops the statement then (sqldb.TimeLimited).
const usersBudget = 6

// usersAttempts bounds the attempts at a count that failed on a lost
// connection; a timeout, and the database's answer (an error in a named
// audience's SQL), are final.
const usersAttempts = 3

// usersWalkMax bounds the rows of a named audience a count walks: its
// user ids are kept in memory (8 bytes each) while sends run. Above it,
// users_targeted stays null (users_count_error says why).
const usersWalkMax = 1_000_000

// errTooManyRows is a named audience's count stopped at usersWalkMax.
var errTooManyRows = errors.New("too many rows to count")

// userCount is a count of a plan's users in progress.
type userCount struct {
	done   chan struct{} // closed when n and err are set
	n      int64
	err    error
	cancel context.CancelFunc
}

// ready answers the count if it is in, without waiting.
func (u *userCount) ready() *int64 {
	if u == nil {
		return nil
	}
	select {
	case <-u.done:
		if u.err == nil {
			return &u.n
		}
	default:
	}
	return nil
}

// countUsers starts counting b's users over its plan's snapshot upto; nil
// when they are counted already (an earlier holder of the plan stored
// them with its last step, or the submit did), when a count failed for
// good, or when an earlier run of the plan began one less than usersLate
// ago (the sweep counts it if it was lost).
func (s *Planner) countUsers(store *repository.Store, b *model.Broadcast, upto uint64, log *slog.Logger) *userCount {
	if b.UsersTargeted != nil || b.UsersCountError != "" {
		return nil
	}
	ctx, cancel := context.WithCancel(s.in.Running)
	// The claim and the snapshot take a second at most: a database that
	// takes longer is in trouble, and the plan does not wait for it.
	read, done := context.WithTimeout(ctx, min(s.in.DBTimeout, time.Second))
	defer done()
	if ok, err := s.store.ClaimUsersCount(read, b.ID, s.usersLate()); err != nil || !ok {
		if err != nil {
			log.WarnContext(ctx, "not counting a broadcast's users: the sweep counts them after the plan", "err", err)
		} else {
			log.InfoContext(ctx, "a broadcast's users are counted by an earlier run of its plan, or were: not counting again")
		}
		cancel()
		return nil
	}
	u := &userCount{done: make(chan struct{}), cancel: cancel}
	// A built-in audience is counted in a snapshot taken here, before the
	// plan's first step of this run.
	var snap *repository.Snapshot
	if b.Audience.Name == "" {
		var err error
		if snap, err = store.SnapshotTx(ctx, read); err != nil {
			log.WarnContext(ctx, "no snapshot for counting a broadcast's users: counting without", "err", err)
		}
	}
	if !s.in.Group.Go(func() {
		defer close(u.done)
		start := time.Now()
		u.n, u.err = s.usersOf(ctx, store, snap, b, upto)
		if snap != nil {
			snap.Close()
		}
		if u.err == nil {
			log.InfoContext(ctx, "broadcast's users counted", "users_targeted", u.n, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		s.countFailed(ctx, b.ID, u.err, log)
	}) {
		if snap != nil {
			snap.Close()
		}
		cancel()
		return nil
	}
	return u
}

// countFailed logs a failed count of broadcast id's users, and records
// it on the row when it failed for good (finalCount).
func (s *Planner) countFailed(ctx context.Context, id uint64, err error, log *slog.Logger) {
	if ctx.Err() != nil {
		return // stopping: a later run, or the sweep, counts them
	}
	if !finalCount(err) {
		log.WarnContext(ctx, "counting a broadcast's users failed: the sweep counts them again", "err", err)
		return
	}
	reason := err.Error()
	switch {
	case repository.IsTimeLimit(err), errors.Is(err, context.DeadlineExceeded):
		reason = fmt.Sprintf("the count ran past its limit of %v (docs/CAPACITY.md)", usersBudget*s.in.DBTimeout)
	case errors.Is(err, errTooManyRows):
		reason = fmt.Sprintf("a named audience of more than %d rows is not counted (docs/CAPACITY.md)", s.walkMax())
	}
	log.WarnContext(ctx, "counting a broadcast's users failed: its users_targeted stays null", "err", err, "reason", reason)
	if err := s.in.RetryDB(ctx, "recording a failed count of users", func(c context.Context) error {
		return s.store.FailUsersCount(c, id, reason)
	}); err != nil {
		log.WarnContext(ctx, "recording a failed count of users failed", "err", err)
		return
	}
	s.opt.Changed(id)
}

// finalCount reports a count's error that a new count would meet again:
// the database's answer to the statement (its time limit among them), the
// count's own limits, a timeout. A lost connection is not.
func finalCount(err error) bool {
	return repository.IsStatementError(err) || errors.Is(err, context.DeadlineExceeded)
}

// storeUsersLater stores u's count once it is in, for a plan whose last
// step was stored before it: then nothing else will.
func (s *Planner) storeUsersLater(id uint64, u *userCount, log *slog.Logger) {
	if u == nil {
		return
	}
	if !s.in.Group.Go(func() {
		defer u.cancel()
		select {
		case <-u.done:
		case <-s.in.Running.Done():
			return
		}
		if u.err != nil {
			return
		}
		ctx := s.in.Running // a stop does not wait for it: the sweep counts it again
		if err := s.in.RetryDB(ctx, "storing a broadcast's users", func(c context.Context) error {
			return s.leases.SetUsersTargeted(c, id, u.n)
		}); err != nil {
			log.WarnContext(ctx, "storing a broadcast's users failed: the sweep counts them again", "err", err)
			return
		}
		s.opt.Changed(id)
	}) {
		u.cancel() // stopping: a planner's sweep counts it again (recountLate)
	}
}

// A count lost with its planner (stopped, or killed, before the count
// was stored; a plan handed back or taken over whose first count was
// lost) is found by the planners' sweep: a broadcast still to finish,
// planned more than usersLate ago, its users null, no count begun within
// usersLate and none failed for good. The instance that claims it
// (repository.ClaimUsersCount: one at a time) counts it again from the
// tokens as they are then, its own dead ones counted live.
type lateUsers struct {
	running atomic.Bool
	last    time.Time // the last sweep (the loop's goroutine only)
	walkMax int       // usersWalkMax when 0 (a test's is lower)
}

// walkMax is the rows of a named audience a count walks at most.
func (s *Planner) walkMax() int {
	if s.late.walkMax > 0 {
		return s.late.walkMax
	}
	return usersWalkMax
}

// usersSweep is how often a planner looks for lost counts.
const usersSweep = time.Minute

// usersLate is how long after its start a count has surely ended,
// whatever its attempts took.
func (s *Planner) usersLate() time.Duration {
	return time.Duration(usersAttempts*(usersBudget+1)+1) * s.in.DBTimeout
}

// recountLate starts a sweep for lost counts, every usersSweep at most,
// one at a time; called by the planner's loop when it has no plan to run.
func (s *Planner) recountLate() {
	l := &s.late
	if time.Since(l.last) < usersSweep || !l.running.CompareAndSwap(false, true) {
		return
	}
	l.last = time.Now()
	if !s.in.Group.Go(func() {
		defer l.running.Store(false)
		s.sweepUsers(s.in.Running)
	}) {
		l.running.Store(false)
	}
}

// sweepUsers counts the lost counts UncountedUsers lists: a count claimed
// here keeps its row out of the next sweeps' lists for usersLate, and one
// failed for good out of them for ever, so failing rows never hide newer
// ones.
func (s *Planner) sweepUsers(ctx context.Context) {
	var list []*model.Broadcast
	if err := s.in.RetryDB(ctx, "finding lost counts of users", func(c context.Context) (err error) {
		list, err = s.store.UncountedUsers(c, s.usersLate(), 20)
		return err
	}); err != nil {
		s.in.Log.WarnContext(ctx, "finding lost counts of users failed", "err", err)
		return
	}
	for _, b := range list {
		if ctx.Err() != nil {
			return
		}
		log := s.in.Log.With("broadcast_id", b.ID)
		var ok bool
		if err := s.in.RetryDB(ctx, "claiming a lost count of users", func(c context.Context) (err error) {
			ok, err = s.store.ClaimUsersCount(c, b.ID, s.usersLate())
			return err
		}); err != nil || !ok {
			continue // another instance counts it
		}
		store, err := s.appStore(b)
		var n int64
		if err == nil {
			n, err = s.usersOf(ctx, store, nil, b, b.MaxTokenID)
		}
		if err != nil {
			s.countFailed(ctx, b.ID, err, log)
			continue
		}
		if err := s.in.RetryDB(ctx, "storing a broadcast's users", func(c context.Context) error { return s.leases.SetUsersTargeted(c, b.ID, n) }); err != nil {
			log.WarnContext(ctx, "storing a broadcast's lost users failed: the sweep counts them again", "err", err)
			continue
		}
		log.InfoContext(ctx, "broadcast's lost users counted again", "users_targeted", n)
		s.opt.Changed(b.ID)
	}
}

// usersOf counts the users of b's planned audience: a built-in one's in
// one statement (in snap when not nil) that the server stops after
// usersBudget database timeouts, a named one's by reading it whole (user
// ids kept, 8 bytes each, to count a user whose rows lie in several pages
// once; usersWalkMax rows at most).
func (s *Planner) usersOf(ctx context.Context, store *repository.Store, snap *repository.Snapshot, b *model.Broadcast, upto uint64) (int64, error) {
	limit := usersBudget * s.in.DBTimeout
	if b.Audience.Name == "" {
		return s.retryCount(ctx, func(c context.Context) (int64, error) {
			if sn := snap; sn != nil {
				snap = nil // a connection lost loses the snapshot: a retry counts on the pool
				return store.CountBroadcastUsers(c, sn.Tx, b.Audience, upto, b.ID, limit)
			}
			return store.CountBroadcastUsers(c, nil, b.Audience, upto, b.ID, limit)
		})
	}
	bound, err := s.opt.Bind(b.Audience)
	if err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return s.retryCount(ctx, func(c context.Context) (int64, error) {
		read := s.namedUsersReader(store, bound, false)
		var users []uint64
		compacted, walked := 0, 0
		for after := uint64(0); ; {
			rows, full, err := read(c, after, 0)
			if err != nil {
				return 0, err
			}
			if walked += len(rows); walked > s.walkMax() {
				return 0, fmt.Errorf("more than %d rows: %w", s.walkMax(), errTooManyRows)
			}
			for _, r := range rows {
				if r.Consent&repository.ConsentDay != 0 { // as planPass counts them
					users = append(users, r.UserID)
				}
			}
			if len(users) > 2*compacted+namedStepRows {
				slices.Sort(users)
				users = slices.Compact(users)
				compacted = len(users)
			}
			if !full || len(rows) == 0 {
				break
			}
			after = rows[len(rows)-1].ID
		}
		slices.Sort(users)
		return int64(len(slices.Compact(users))), nil
	})
}

// retryCount runs count with usersBudget database timeouts an attempt
// (and one more, for the server's own limit to answer first),
// usersAttempts times at most while the connection fails, once when it
// times out.
func (s *Planner) retryCount(ctx context.Context, count func(context.Context) (int64, error)) (int64, error) {
	var err error
	for attempt := 1; ; attempt++ {
		c, cancel := context.WithTimeout(ctx, (usersBudget+1)*s.in.DBTimeout)
		var n int64
		n, err = count(c)
		cancel()
		if err == nil {
			return n, nil
		}
		// A count that ran out of time would again: a repeated scan of the
		// audience only loads the database the sends use.
		if ctx.Err() != nil || attempt == usersAttempts || finalCount(err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
	return 0, fmt.Errorf("count users: %w", err)
}

// inlineUsers counts the users of an inline plan's rows (a short user_ids
// list, read whole inside its submit): the users with a targeted token.
func inlineUsers(rows []repository.PlanRow, users map[uint64]struct{}) {
	for _, r := range rows {
		if r.Consent&repository.ConsentDay != 0 {
			users[r.UserID] = struct{}{}
		}
	}
}
