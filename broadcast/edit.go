package broadcast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/broadcast/rules"
	"pushfan/lease"
	"pushfan/model"
)

// Errors of an edit, which the HTTP layer maps to 409s (rules.ErrStarted,
// rules.ErrReleased, rules.ErrNotEditable).
var (
	ErrStarted     = rules.ErrStarted
	ErrReleased    = rules.ErrReleased
	ErrNotEditable = rules.ErrNotEditable
)

// EditSpec is an edit of an unstarted broadcast (rules.EditSpec).
type EditSpec = rules.EditSpec

// Edit changes the message and send time of broadcast id while it is
// scheduled or held and not released (lease.EditUnstarted). The new
// message and time are checked by the submit's own rules (Validate), on
// the broadcast's stored audience, app, category, pacing and platform
// overrides, so an edit is refused with the field errors a submit of it
// would get. A concurrent start wins: the edit answers ErrStarted.
//
// With the four-eyes setting, a held broadcast is not edited at all
// (ErrEditFourEyes): it waits for a second person's release, and a release
// approves the text its approver read; an edit between that reading and
// the click (by anyone, its creator too) would go out unreviewed. It is
// canceled and submitted again for approval.
func (s *Service) Edit(ctx context.Context, id uint64, e EditSpec) (*model.Broadcast, error) {
	if s.stopping.Closed() {
		return nil, ErrShuttingDown
	}
	b, err := s.reads.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case b.Status != model.StatusScheduled && b.Status != model.StatusHeld:
		return nil, fmt.Errorf("broadcast %d is %s: %w", id, b.Status, ErrStarted)
	case b.ReleasedAt != nil:
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrReleased)
	case b.Status == model.StatusHeld && s.opt.FourEyes:
		return nil, fmt.Errorf("broadcast %d: %w", id, rules.ErrEditFourEyes)
	}
	spec, err := editedSpec(b, e)
	if err != nil {
		return nil, fmt.Errorf("broadcast %d: %w", id, err)
	}
	req, err := s.Validate(spec)
	if err != nil {
		return nil, err
	}
	m := b.Message // its overrides, tracking and label as stored
	m.Title, m.Body, m.Image, m.Data, m.LinkKey = req.Message.Title, req.Message.Body, req.Message.Image, req.Message.Data, req.Message.LinkKey
	next := *b
	next.Message, next.SendAt = m, req.SendAt
	next.StartsAt = s.startsAt(&next)
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	err = s.leases.EditUnstarted(dbctx, id, m, next.SendAt, next.StartsAt)
	cancel()
	s.reads.Forget(id)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	case errors.Is(err, lease.ErrStarted):
		return nil, fmt.Errorf("%w (%w)", ErrStarted, err)
	case errors.Is(err, lease.ErrReleased):
		return nil, fmt.Errorf("%w (%w)", ErrReleased, err)
	case err != nil:
		return nil, fmt.Errorf("editing broadcast %d: %w", id, unavailable(err))
	}
	s.log.InfoContext(ctx, "unstarted broadcast edited", "broadcast_id", id, "status", b.Status, "send_at", next.SendAt, "starts_at", next.StartsAt)
	return s.reads.Get(context.WithoutCancel(ctx), id)
}

// editedSpec is the submit's Spec of b with e's message and send time:
// what Validate checks. A scheduled broadcast keeps its send time when e
// names none.
func editedSpec(b *model.Broadcast, e EditSpec) (rules.Spec, error) {
	m, a := b.Message, b.Audience
	switch {
	case len(m.Variants) > 0:
		return rules.Spec{}, fmt.Errorf("it has A/B variants: %w", ErrNotEditable)
	case len(m.Localized) > 0:
		return rules.Spec{}, fmt.Errorf("it has localized messages: %w", ErrNotEditable)
	case a.Local != nil && a.Local.At != "":
		return rules.Spec{}, fmt.Errorf("it is delivered at the users' local time: %w", ErrNotEditable)
	case a.ResendOf != 0:
		return rules.Spec{}, fmt.Errorf("it is a resend: %w", ErrNotEditable)
	}
	aud := &rules.AudienceSpec{All: a.All, UserIDs: a.UserIDs, Name: a.Name}
	if len(a.Params) > 0 {
		if err := json.Unmarshal(a.Params, &aud.Params); err != nil {
			return rules.Spec{}, fmt.Errorf("stored audience params: %w", err)
		}
	}
	if a.Segment != nil {
		aud.Segment = a.Segment.Name
	}
	spec := rules.Spec{
		Title: e.Title, Body: e.Body, Image: e.Image, Data: e.Data, LinkDataKey: e.LinkDataKey, SendAt: e.SendAt,
		Audience: aud, App: b.App, DryRun: b.DryRun, InvalidateOnDryRun: b.InvalidateOnDryRun, Track: m.Track,
		Class: b.Class, Android: m.Android, APNS: m.APNS, Webpush: m.Webpush, FCMOptions: m.FCMOptions,
	}
	if spec.SendAt == "" && b.SendAt != nil {
		spec.SendAt = b.SendAt.UTC().Format(time.RFC3339Nano)
	}
	if b.MaxRate > 0 {
		r := b.MaxRate
		spec.MaxRate = &r
	}
	if b.DeliverOver > 0 {
		spec.DeliverOver = b.DeliverOver.String()
	}
	if b.Category != nil {
		spec.Category = b.Category.Name
	}
	return spec, nil
}
