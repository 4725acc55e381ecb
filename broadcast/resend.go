package broadcast

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"pushfan/broadcast/message"
	"pushfan/fanout"
	"pushfan/fcm"
	"pushfan/model"
)

// Errors of a resend the HTTP layer answers with 409: the original's state
// or data, not the request, is what is wrong.
var (
	// ErrNotFinal: the original is still held, scheduled, queued or
	// running; its failures are not all known yet.
	ErrNotFinal = errors.New("broadcast has not finished")
	// ErrUnresolvable: the original's failures name no device token (a
	// named audience's rows carry none), so a resend could reach nobody.
	ErrUnresolvable = errors.New("the broadcast's failures cannot be resolved to device tokens")
	// ErrNothingToResend: the original has no failure with those codes.
	ErrNothingToResend = errors.New("the broadcast has no failures with those codes")
)

// DefaultResendCodes are the transient codes a resend covers when the
// request names none: answers that a later attempt may turn into a
// delivery.
var DefaultResendCodes = []string{fcm.CodeUnavailable, fcm.CodeInternal, fanout.CodeQuota, fanout.CodeTimeout, fcm.CodeNetwork}

// unresendable are codes a resend of the same message to the same token
// can never turn into a delivery: the token is dead or belongs to another
// sender (pushfan invalidated it already), or FCM or pushfan refused the
// message itself (INVALID_ARGUMENT is either a bad token or a bad message).
var unresendable = map[string]string{
	fcm.CodeUnregistered: "the token is no longer registered",
	fcm.CodeMismatch:     "the token belongs to another sender",
	fcm.CodeInvalidArg:   "the token or the message is invalid",
	fanout.CodeTemplate:  "the message template does not render for the target",
	fanout.CodeMessage:   "the message could not be prepared",
}

// ResendRequest asks for a new broadcast over a finished one's failures.
type ResendRequest struct {
	ID uint64 // the original broadcast
	// Codes selects the failures to resend (nil: DefaultResendCodes).
	Codes          []string
	Hold           bool
	RequestID      string
	CreatedBy      string
	Creator        model.Actor
	IdempotencyKey string
}

// ResendCodes checks the codes a resend asks for (nil: the defaults) and
// returns them sorted without repeats, or a *rules.FieldError on field codes.
func ResendCodes(codes []string) ([]string, error) {
	if codes == nil {
		return slices.Sorted(slices.Values(DefaultResendCodes)), nil
	}
	if len(codes) == 0 {
		return nil, message.FieldErrorf("invalid_value", "codes", "codes must not be empty; leave it out for the transient codes %v", DefaultResendCodes)
	}
	for _, c := range codes {
		if !fcm.IsKnownCode(c) {
			return nil, message.FieldErrorf("unknown_code", "codes", "code %q is not an error code pushfan reports; known codes: %v", c, fcm.KnownCodes())
		}
		if why, ok := unresendable[c]; ok {
			return nil, message.FieldErrorf("code_not_resendable", "codes", "failures with code %s can never succeed on a resend (%s)", c, why)
		}
	}
	out := slices.Clone(codes)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Resend submits a new broadcast with the original's message, dry_run,
// class, pacing, local time and quiet hours, over the targets that failed in it with one of the
// codes and whose tokens are still valid (and users still push-enabled),
// as trigger resend with parent_id the original. Its audience is paged and
// chunked like the built-in ones.
func (s *Service) Resend(ctx context.Context, rr ResendRequest) (*model.Broadcast, bool, error) {
	codes, err := ResendCodes(rr.Codes)
	if err != nil {
		return nil, false, err
	}
	orig, err := s.reads.Get(ctx, rr.ID)
	if err != nil {
		return nil, false, err
	}
	if !orig.Status.Final() {
		return nil, false, fmt.Errorf("broadcast %d is %s: %w", rr.ID, orig.Status, ErrNotFinal)
	}
	if orig.Audience.Name != "" {
		return nil, false, fmt.Errorf("broadcast %d went to named audience %q, whose failures carry no token id: %w", rr.ID, orig.Audience.Name, ErrUnresolvable)
	}
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	resolvable, unresolvable, err := s.store.ResendFailures(dbctx, rr.ID, codes)
	cancel()
	switch {
	case err != nil:
		return nil, false, err
	case !resolvable && unresolvable:
		return nil, false, fmt.Errorf("broadcast %d: its failures with codes %v have no token id: %w", rr.ID, codes, ErrUnresolvable)
	case !resolvable:
		return nil, false, fmt.Errorf("broadcast %d, codes %v: %w", rr.ID, codes, ErrNothingToResend)
	}
	return s.Submit(ctx, Request{
		Submission: model.Submission{
			App:                orig.App, // the failed tokens are the original's app's
			Message:            orig.Message,
			Audience:           model.Audience{ResendOf: orig.ID, Codes: codes, Local: orig.Audience.Local},
			DryRun:             orig.DryRun,
			InvalidateOnDryRun: orig.InvalidateOnDryRun,
			RequestID:          rr.RequestID,
			CreatedBy:          rr.CreatedBy,
			Creator:            rr.Creator,
			IdempotencyKey:     rr.IdempotencyKey,
			Trigger:            "resend",
			Class:              orig.Class,
			MaxRate:            orig.MaxRate,
			DeliverOver:        orig.DeliverOver,
			ParentID:           orig.ID,
			// In its original's category, under the rules it ran under:
			// its message carries that category's labels.
			Category: orig.Category,
			// Capped as its original was: it is the same message to the
			// same users (see run.capRoot).
			FrequencyCap: orig.FrequencyCap,
		},
		Hold: rr.Hold,
	})
}
