package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pushfan/lease"
)

// releasePlan hands a plan back at once (this instance is stopping).
func (s *Planner) releasePlan(ctx context.Context, log logger, pc *lease.PlanClaim) {
	c, cancel := context.WithTimeout(ctx, s.in.DBTimeout)
	defer cancel()
	if _, err := s.leases.ReleasePlan(c, pc, 0, false); err == nil {
		log.InfoContext(ctx, "plan handed back for another instance", "cursor", pc.Cursor)
	}
}

// planFailed records a failed attempt at a plan and hands it back to be
// retried with backoff; past planAttempts the broadcast fails with why.
func (s *Planner) planFailed(ctx context.Context, log logger, pc *lease.PlanClaim, why error) {
	base := s.opt.PlanRetry
	if base <= 0 {
		base = time.Second
	}
	retryIn := min(base<<min(pc.Failures, 6), time.Minute)
	var failures int
	if err := s.in.RetryDB(ctx, "recording a failed plan", func(c context.Context) (err error) {
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
	s.runs.Fail(ctx, pc.BroadcastID, fmt.Sprintf("planning the audience failed %d times: %v", failures, why))
}

// refusePlan hands back a plan this instance cannot run; when no instance
// could for HandBackTimeout, the broadcast fails.
func (s *Planner) refusePlan(ctx context.Context, log logger, pc *lease.PlanClaim, why error) {
	s.runs.Refuse(pc.BroadcastID)
	var waited time.Duration
	if err := s.in.RetryDB(ctx, "handing a plan back", func(c context.Context) (err error) {
		// Claimable again at once by the other instances: this one leaves it
		// alone for RefuseFor by its own refusals. Holding it from every
		// instance for that long let the refusing one, whose refusal ends
		// at the same moment, take it again before an instance that can
		// plan it, and fail it past a HandBackTimeout shorter than that.
		waited, err = s.leases.RefusePlan(c, pc, 0)
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
	s.runs.Fail(ctx, pc.BroadcastID, fmt.Sprintf("no instance could plan this broadcast for %v: %v", s.opt.HandBackTimeout, why))
}

// logger is what the plan helpers log with.
type logger interface {
	InfoContext(context.Context, string, ...any)
	WarnContext(context.Context, string, ...any)
	ErrorContext(context.Context, string, ...any)
}
