package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
	"pushfan/internal/platform/logging"
)

// resendRequest is the optional body of POST /push/broadcasts/{id}/resend.
type resendRequest struct {
	// Codes selects the failures to resend; absent means the transient
	// codes (broadcast.DefaultResendCodes).
	Codes []string `json:"codes"`
	Hold  bool     `json:"hold"`
	Wait  *bool    `json:"wait"`
}

// resendBroadcast creates a broadcast over a finished one's failures and
// answers it as POST /push/broadcast does: 200 when it finished within the
// wait, else 202 with a Location.
func (s *Server) resendBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	var req resendRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	wait, err := waitParam(c, req.Wait)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rr := broadcast.ResendRequest{ID: id, Codes: req.Codes, Hold: req.Hold, RequestID: logging.RequestID(ctx)}
	if t := caller(c); t != nil {
		rr.CreatedBy, rr.Creator = t.Name, t.Actor
	}
	if rr.IdempotencyKey, err = idempotencyKey(c); err != nil {
		return err
	}
	b, existing, err := s.dom.Submitter.Resend(ctx, rr)
	if err != nil {
		return resendError(err)
	}
	return s.answerSubmitted(c, b, existing, wait)
}

// decodeOptional decodes a body that may also be empty (whitespace only).
func decodeOptional(c echo.Context, v any) error {
	err := decodeStrict(c.Request().Body, v)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == "empty_body" {
		return nil
	}
	return err
}

// resendError maps the resend's refusals about the original to 409s.
func resendError(err error) error {
	conflict := func(code, msg string) error {
		return &APIError{Status: http.StatusConflict, Code: code, Message: msg + ": " + err.Error()}
	}
	switch {
	case errors.Is(err, broadcast.ErrNotFinal):
		return conflict("not_finished", "a broadcast can be resent only once it has finished (held, scheduled, queued and running ones cannot)")
	case errors.Is(err, broadcast.ErrUnresolvable):
		return conflict("failures_unresolvable", "the broadcast's failures carry no device token id (a named audience's rows do not), so a resend could reach nobody")
	case errors.Is(err, broadcast.ErrNothingToResend):
		return conflict("nothing_to_resend", "the broadcast has no failures with the requested codes")
	}
	return err
}
