package lease

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"pushfan/audit"
	"pushfan/model"
	"pushfan/repository"
)

// Planner plans a broadcast at submit, inside the transaction that stores
// it: the whole plan of a bounded audience (user_ids, which reads a capped
// list of users), or nil for an audience whose plan reads the tables and
// so is made in steps after the submit has answered, by any instance
// (ClaimPlan, CommitStep).
type Planner func(ctx context.Context, tx *sql.Tx, b *model.Broadcast) (*Step, error)

// Submit stores b, in one transaction with its whole plan when plan makes
// it at once (queued, with its chunks) or else as planning (its plan
// follows, on any instance); or scheduled (b.SendAt or b.StartsAt set;
// PromoteDue makes it planning when it is due), or held (b.HoldExpiresAt
// set; ReleaseHeld). So no broadcast exists without the work that
// completes it. b.SubmitToken, when set, makes the submit recognisable
// after a lost commit answer (repository's FindBySubmitToken). With
// b.IdempotencyKey set and already used, it returns
// repository.ErrDuplicateKey.
func (s *Store) Submit(ctx context.Context, b *model.Broadcast, plan Planner) error {
	err := s.inTx(ctx, "submit broadcast", func(tx *sql.Tx) error {
		b.Status = model.StatusPlanning
		switch {
		case b.HoldExpiresAt != nil:
			b.Status = model.StatusHeld // planned when released (ReleaseHeld)
		case b.SendAt != nil || b.StartsAt != nil: // StartsAt alone: a cron fire's spread start
			b.Status = model.StatusScheduled
		}
		var st *Step
		if b.Status == model.StatusPlanning {
			var err error
			if st, err = plan(ctx, tx, b); err != nil {
				return err
			}
			if st != nil {
				b.Status = model.StatusQueued
			}
		}
		if err := repository.InsertBroadcast(ctx, tx, b); err != nil {
			return err
		}
		// The request's audit entry commits with the broadcast.
		audit.Created(ctx, "broadcast", strconv.FormatUint(b.ID, 10))
		if err := audit.Write(ctx, tx); err != nil {
			return err
		}
		if b.Status == model.StatusHeld {
			if err := s.event(ctx, tx, EventHeld, b.ID); err != nil {
				return err
			}
		}
		if st == nil {
			return nil
		}
		b.MaxTokenID, b.Targeted, b.Deferred, b.ZoneFallbacks = st.MaxCursor, st.Added, st.Deferred, st.ZoneFallbacks
		b.ExcludedNoConsent, b.NightDeferred, b.UsersTargeted = st.Excluded, st.NightDeferred, st.UsersTargeted
		if s.keepNone {
			st.Kept = nil
		}
		return StorePlan(ctx, tx, b.ID, ClassOf(b.Class, b.Paced()), *st)
	})
	if err != nil {
		return fmt.Errorf("submit broadcast: %w", err)
	}
	return nil
}

// Create stores b as it is given, in status queued unless b.Status is set,
// with its counters and per-code error counts: an import of a broadcast
// that ran elsewhere (a finished one), or a test's fixture. Nothing is
// planned: a queued or running one created so has no chunks to run.
func (s *Store) Create(ctx context.Context, b *model.Broadcast) error {
	if b.Status == "" {
		b.Status = model.StatusQueued
	}
	err := s.inTx(ctx, "create broadcast", func(tx *sql.Tx) error {
		if err := repository.InsertBroadcast(ctx, tx, b); err != nil {
			return err
		}
		return AddErrorCounts(ctx, tx, b.ID, b.Errors)
	})
	if err != nil {
		b.ID = 0
		return fmt.Errorf("create broadcast: %w", err)
	}
	return nil
}
