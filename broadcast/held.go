package broadcast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pushfan/lease"
	"pushfan/model"
)

// Errors of holding and releasing, which the HTTP layer maps to statuses.
var (
	// ErrNotHeld: release of a broadcast that is not held (409).
	ErrNotHeld = errors.New("broadcast is not held")
	// ErrFourEyes: the four-eyes setting is on and the actor releasing
	// (person, key or token) is the one that created it (403).
	ErrFourEyes = errors.New("a held broadcast must be released by another person, key or token than the one that created it")
)

// DefaultHoldExpiry is how long a held broadcast waits for its release
// when Options.HoldExpiry is not set.
const DefaultHoldExpiry = 7 * 24 * time.Hour

// holdExpiry is the configured expiry, or the default.
func (s *Service) holdExpiry() time.Duration {
	if s.opt.HoldExpiry > 0 {
		return s.opt.HoldExpiry
	}
	return DefaultHoldExpiry
}

// held follows up on a broadcast just stored as held: its audience is
// counted in the background (as for a queued one, an admin should not wait
// for a count of millions), so the preview shows targeted. Nothing is
// planned or sent until Release.
func (s *Service) held(ctx context.Context, b *model.Broadcast) {
	s.log.InfoContext(ctx, "broadcast held", "broadcast_id", b.ID, "hold_expires_at", b.HoldExpiresAt, "created_by", b.CreatedBy)
	s.group.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := s.countHeld(ctx, b); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "counting a held broadcast's audience", "broadcast_id", b.ID, "err", err)
		}
	})
}

func (s *Service) countHeld(ctx context.Context, b *model.Broadcast) error {
	var n int64
	var err error
	if b.Audience.Name != "" {
		bound, berr := s.opt.Rules.Bind(b.Audience)
		if berr != nil {
			return berr
		}
		n, _, err = s.opt.Named.Preview(ctx, bound, 0)
	} else {
		app, aerr := s.opt.Rules.AppOf(s.apps, b.App)
		if aerr != nil {
			return aerr
		}
		n, err = app.Store.ForCategory(b.Category).CountAudience(ctx, b.Audience)
	}
	if err != nil {
		return err
	}
	s.reads.Forget(b.ID)
	return s.leases.SetHeldTargets(ctx, b.ID, n)
}

// Release lets held broadcast id go, released by actor by: it is planned
// now, by any instance, after the answer (its audience snapshotted at
// this moment), or scheduled when its send_at is still ahead. With the
// four-eyes setting, by must be another actor than the broadcast's
// creator, whatever its role: actors are compared (kind and id), not
// names, so two people of one name are two, and a key and a token of one
// name are two.
func (s *Service) Release(ctx context.Context, id uint64, by model.Actor) (*model.Broadcast, error) {
	if s.stopping.Closed() {
		return nil, ErrShuttingDown
	}
	b, err := s.reads.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Status != model.StatusHeld {
		return nil, fmt.Errorf("broadcast %d is %s: %w", id, b.Status, ErrNotHeld)
	}
	if creator := b.CreatorActor(); s.opt.FourEyes && creator.Same(by) {
		return nil, fmt.Errorf("broadcast %d was created by %s %q: %w", id, creator.Kind, creator.Name, ErrFourEyes)
	}
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	status, err := s.leases.ReleaseHeld(dbctx, id, by)
	cancel()
	s.reads.Forget(id)
	switch {
	case errors.Is(err, lease.ErrNotHeld):
		// A concurrent release or cancel won, or our own commit did and
		// its answer was lost: the row says which.
		cur, gerr := s.reads.Get(context.WithoutCancel(ctx), id)
		if gerr != nil || !cur.Releaser.Same(by) || cur.ReleasedAt == nil {
			return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotHeld)
		}
		return cur, nil
	case errors.Is(err, lease.ErrNotFound):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("releasing broadcast %d: %w", id, unavailable(err))
	}
	s.log.InfoContext(ctx, "held broadcast released", "broadcast_id", id, "released_by", by.Name, "released_by_kind", by.Kind, "released_by_id", by.ID, "status", status)
	b, err = s.reads.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return nil, err
	}
	if status == model.StatusPlanning {
		s.planner.Wake()
	}
	return b, nil
}

// expireHolds cancels held broadcasts nobody released in time (on exactly
// one instance each, see Store.ExpireHolds). The promoter calls it.
func (s *Service) expireHolds(ctx context.Context) error {
	ids, err := s.leases.ExpireHolds(ctx)
	for _, id := range ids {
		s.reads.Forget(id)
		s.log.InfoContext(ctx, "held broadcast expired unreleased: canceled", "broadcast_id", id)
	}
	return err
}
