package broadcast

import (
	"context"
	"errors"

	"pushfan/broadcast/message"
	"pushfan/broadcast/rules"
	"pushfan/internal/platform/logging"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// Validate checks spec by the request rules, with the service's clock for
// send_at: a *rules.FieldError names a broken rule.
func (s *Service) Validate(spec rules.Spec) (Request, error) {
	return s.opt.Rules.Validate(spec, s.now())
}

// Request is a validated broadcast submission (package rules makes it:
// the rules and the jobs build it, the Service stores it).
type Request = rules.Request

// Submit stores the broadcast and its chunks; the dispatchers (of any
// instance) send it. A repeat of an idempotent request returns the
// original broadcast and existing=true.
func (s *Service) Submit(ctx context.Context, req Request) (b *model.Broadcast, existing bool, err error) {
	if req.IdempotencyKey != "" && req.RequestHash == "" {
		req.RequestHash = requestHash(req)
	}
	if s.stopping.Closed() {
		return nil, false, ErrShuttingDown
	}
	if req.IdempotencyKey != "" {
		if b, err := s.existing(ctx, req); b != nil || err != nil {
			return b, b != nil, err
		}
	}
	if seg := req.Audience.Segment; seg != nil && seg.Version == 0 {
		ref, err := s.segment(ctx, req.App, seg.Name)
		if err != nil {
			return nil, false, err
		}
		req.Audience.Segment = &ref // the version it is sent to, kept
	}
	b = &model.Broadcast{Submission: req.Submission} // stored as the rules checked it
	if req.Hold {
		at := s.now().Add(s.holdExpiry()).UTC()
		b.HoldExpiresAt = &at
	}
	if b.Trigger == "" {
		b.Trigger = "api"
		if b.SendAt != nil {
			b.Trigger = "schedule"
		}
	}
	// The token makes the submit safe to retry: a commit whose answer was
	// lost is found by it, and its unique key stops a second row.
	b.SubmitToken = lease.NewToken()
	b.StartsAt = s.startsAt(b)
	err = s.in.RetryDB(ctx, "submitting broadcast", func(c context.Context) error {
		err := s.leases.Submit(c, b, s.planner.Inline)
		if err == nil || errors.Is(err, repository.ErrDuplicateKey) {
			return err
		}
		found, ferr := s.store.FindBySubmitToken(c, b.SubmitToken)
		if ferr != nil {
			return err // not stored (or unknown yet): try again
		}
		s.log.WarnContext(ctx, "a submit whose commit answer was lost had been stored", "broadcast_id", found.ID, "err", err)
		*b = *found
		return nil
	})
	if errors.Is(err, repository.ErrDuplicateKey) {
		// A concurrent request with the same key won the insert, or our own
		// first attempt did and its answer was lost.
		found, err := s.existing(ctx, req)
		if err != nil || found == nil || found.SubmitToken != b.SubmitToken {
			return found, found != nil, err
		}
		b = found
	} else if err != nil {
		return nil, false, unavailable(err)
	}
	log := s.log.With("broadcast_id", b.ID)
	if b.Status == model.StatusHeld {
		s.held(logging.WithRequestID(s.claiming, req.RequestID), b)
		return b, false, nil
	}
	switch b.Status {
	case model.StatusScheduled:
		log.InfoContext(ctx, "broadcast scheduled", "send_at", b.SendAt, "starts_at", b.StartsAt, "trigger", b.Trigger)
	case model.StatusPlanning:
		log.InfoContext(ctx, "broadcast stored; planning its audience", "dry_run", b.DryRun, "trigger", b.Trigger)
		s.planner.Wake()
	default:
		log.InfoContext(ctx, "broadcast queued", "targeted", b.Targeted, "max_token_id", b.MaxTokenID, "dry_run", b.DryRun, "trigger", b.Trigger)
		s.runner.Finish(logging.WithRequestID(s.claiming, req.RequestID), b.ID) // nobody in the audience: it ends at once
		s.runner.Poke()
	}
	return b, false, nil
}

// segment is the saved segment name as a broadcast of app is sent to it
// now: its current version and filter, checked against the app's schema
// (a segment saved over columns this app's tables lack is a 400).
func (s *Service) segment(ctx context.Context, app, name string) (model.SegmentRef, error) {
	var ref model.SegmentRef
	err := s.in.RetryDB(ctx, "reading a segment", func(c context.Context) (err error) {
		ref, err = s.store.SegmentCurrent(c, name)
		if errors.Is(err, repository.ErrNotFound) {
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return ref, unavailable(err)
	case ref.Version == 0:
		return ref, message.FieldErrorf("unknown_segment", "audience.segment", "no segment named %q (GET /push/segments lists them)", name)
	}
	a, err := s.opt.Rules.AppOf(s.apps, app)
	if err != nil {
		return ref, err
	}
	if err := a.Store.Schema().CheckSegment(ref); err != nil {
		return ref, message.FieldErrorf("invalid_segment", "audience.segment", "segment %q cannot be sent to by app %s: %v", name, a.Name, err)
	}
	return ref, nil
}
