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
// survive a takeover. Each run of a plan counts them beside it instead,
// in one statement over the plan's own predicates and snapshot
// (repository.CountPlannedUsers, the preview's count bounded by the
// snapshot), or a walk of a named audience's rows with the plan's own
// reader.
//
// The count starts with the plan's run, before its first step is stored,
// so it sees the tokens before any send of the broadcast marks one dead,
// as the plan does; it never delays a step. The plan's last step stores
// it when it is in (with the plan's end: one transaction), else it is
// stored as soon as it comes (lease.SetUsersTargeted). A plan taken over
// is counted again by its new holder. A count that fails (each attempt
// bounded by usersBudget database timeouts, retried on a lost connection:
// retryCount) leaves users_targeted null and logs why: the console then
// shows the devices alone.

// usersBudget is the database timeouts one attempt at a count may take:
// a scan of the audience, as a preview's count is (reads).
const usersBudget = 6

// usersAttempts bounds the attempts at a count that failed on a lost
// connection; a timeout, and the database's answer (an error in a named
// audience's SQL), are final.
const usersAttempts = 3

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
// them with its last step, or the submit did).
func (s *Planner) countUsers(store *repository.Store, b *model.Broadcast, upto uint64, log *slog.Logger) *userCount {
	if b.UsersTargeted != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(s.in.Running)
	u := &userCount{done: make(chan struct{}), cancel: cancel}
	// A built-in audience is counted in a snapshot taken here, before the
	// plan's first step: its sends cannot mark a token dead before the
	// count reads it. Without one (the database refused it) the count
	// reads the tokens as they are when it runs.
	var snap *repository.Snapshot
	if b.Audience.Name == "" {
		// A snapshot that takes a second is a database in trouble: the
		// plan does not wait for it.
		read, done := context.WithTimeout(ctx, min(s.in.DBTimeout, time.Second))
		var err error
		if snap, err = store.SnapshotTx(ctx, read); err != nil {
			log.WarnContext(ctx, "no snapshot for counting a broadcast's users: counting without", "err", err)
		}
		done()
	}
	if !s.in.Group.Go(func() {
		defer close(u.done)
		start := time.Now()
		u.n, u.err = s.usersOf(ctx, store, snap, b, upto)
		if snap != nil {
			snap.Close()
		}
		if u.err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "counting a broadcast's users failed: its users_targeted stays null", "err", u.err)
		} else if u.err == nil {
			log.InfoContext(ctx, "broadcast's users counted", "users_targeted", u.n, "took", time.Since(start).Round(time.Millisecond))
		}
	}) {
		if snap != nil {
			snap.Close()
		}
		cancel()
		return nil
	}
	return u
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
			log.WarnContext(ctx, "storing a broadcast's users failed: its users_targeted stays null", "err", err)
			return
		}
		s.opt.Changed(id)
	}) {
		u.cancel() // stopping: a planner's sweep counts it again (recountLate)
	}
}

// A count lost with its planner (stopped, or killed, after the plan's
// last step was stored and before the count was) is found by the
// planners' sweep: a broadcast still to finish, planned more than
// usersLate ago (any count of it would have ended by then), its users
// null. Any planning instance counts it again, once (a count that failed
// would fail again: not every sweep), from the tokens as they are then:
// its snapshot is gone, and a user whose only device the broadcast
// found dead is no longer counted.
type lateUsers struct {
	running atomic.Bool
	last    time.Time           // the last sweep (the loop's goroutine only)
	tried   map[uint64]struct{} // the sweep's goroutine only (one at a time)
}

// usersSweep is how often a planner looks for lost counts.
const usersSweep = time.Minute

// usersLate is how long after its plan's end a broadcast's count has
// surely ended, whatever its attempts took.
func (s *Planner) usersLate() time.Duration {
	return time.Duration(usersAttempts*usersBudget+1) * s.in.DBTimeout
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
		ctx := s.in.Running
		var list []*model.Broadcast
		if err := s.in.RetryDB(ctx, "finding lost counts of users", func(c context.Context) (err error) {
			list, err = s.store.UncountedUsers(c, s.usersLate(), 20)
			return err
		}); err != nil {
			s.in.Log.WarnContext(ctx, "finding lost counts of users failed", "err", err)
			return
		}
		if l.tried == nil {
			l.tried = map[uint64]struct{}{}
		}
		for _, b := range list {
			if _, done := l.tried[b.ID]; done || ctx.Err() != nil {
				continue
			}
			l.tried[b.ID] = struct{}{}
			log := s.in.Log.With("broadcast_id", b.ID)
			store, err := s.appStore(b)
			var n int64
			if err == nil {
				n, err = s.usersOf(ctx, store, nil, b, b.MaxTokenID)
			}
			if err == nil {
				err = s.in.RetryDB(ctx, "storing a broadcast's users", func(c context.Context) error { return s.leases.SetUsersTargeted(c, b.ID, n) })
			}
			if err != nil {
				log.WarnContext(ctx, "counting a broadcast's lost users failed: its users_targeted stays null", "err", err)
				continue
			}
			log.InfoContext(ctx, "broadcast's lost users counted again", "users_targeted", n)
			s.opt.Changed(b.ID)
		}
	}) {
		l.running.Store(false)
	}
}

// usersOf counts the users of b's planned audience: a built-in one's in
// one statement (in snap when not nil), a named one's by reading it
// whole (user ids kept, 8 bytes each, to count a user whose rows lie in
// several pages once).
func (s *Planner) usersOf(ctx context.Context, store *repository.Store, snap *repository.Snapshot, b *model.Broadcast, upto uint64) (int64, error) {
	if b.Audience.Name == "" {
		return s.retryCount(ctx, func(c context.Context) (int64, error) {
			if sn := snap; sn != nil {
				snap = nil // a connection lost loses the snapshot: a retry counts on the pool
				return store.CountPlannedUsers(c, sn.Tx, b.Audience, upto)
			}
			return store.CountPlannedUsers(c, nil, b.Audience, upto)
		})
	}
	bound, err := s.opt.Bind(b.Audience)
	if err != nil {
		return 0, err
	}
	return s.retryCount(ctx, func(c context.Context) (int64, error) {
		read := s.namedUsersReader(store, bound, false)
		var users []uint64
		compacted := 0
		for after := uint64(0); ; {
			rows, full, err := read(c, after, 0)
			if err != nil {
				return 0, err
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

// retryCount runs count with usersBudget database timeouts an attempt,
// usersAttempts times at most while the connection fails, once when it
// times out.
func (s *Planner) retryCount(ctx context.Context, count func(context.Context) (int64, error)) (int64, error) {
	var err error
	for attempt := 1; ; attempt++ {
		c, cancel := context.WithTimeout(ctx, usersBudget*s.in.DBTimeout)
		var n int64
		n, err = count(c)
		cancel()
		if err == nil {
			return n, nil
		}
		// A count that ran out of time would again: a repeated scan of the
		// audience only loads the database the sends use.
		if ctx.Err() != nil || attempt == usersAttempts || repository.IsStatementError(err) || errors.Is(err, context.DeadlineExceeded) {
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
