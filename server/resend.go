package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
	"pushfan/internal/logging"
	"pushfan/model"
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
	wait := req.Wait == nil || *req.Wait
	switch q := c.QueryParam("wait"); q {
	case "":
	case "0", "false":
		wait = false
	case "1", "true":
		wait = true
	default:
		return badRequest("invalid_value", "wait", "query parameter wait must be 0, 1, true or false")
	}
	ctx := c.Request().Context()
	rr := broadcast.ResendRequest{ID: id, Codes: req.Codes, Hold: req.Hold, RequestID: logging.RequestID(ctx)}
	if t := caller(c); t != nil {
		rr.CreatedBy = t.Name
	}
	if key := c.Request().Header.Get("Idempotency-Key"); key != "" {
		if len(key) > 255 || !validIdempotencyKey.MatchString(key) {
			return badRequest("invalid_idempotency_key", "Idempotency-Key", "the Idempotency-Key header must be 1-255 printable ASCII characters")
		}
		rr.IdempotencyKey = key
	}
	b, existing, err := s.svc.Resend(ctx, rr)
	if err != nil {
		return resendError(err)
	}
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	if wait && !b.Status.Final() && b.Status != model.StatusHeld {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.HTTP.WaitTimeout)
		_, err = s.svc.Wait(wctx, b.ID)
		cancel()
		if err != nil {
			return err
		}
	}
	cur, err := s.svc.Get(context.WithoutCancel(ctx), b.ID)
	if err != nil {
		return err
	}
	if cur.Status.Final() {
		return c.JSON(http.StatusOK, s.view(cur))
	}
	c.Response().Header().Set(echo.HeaderLocation, "/push/broadcasts/"+strconv.FormatUint(b.ID, 10))
	return c.JSON(http.StatusAccepted, s.view(cur))
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
