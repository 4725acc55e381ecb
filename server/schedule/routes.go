// Package schedule is the API's route that edits a broadcast before it
// starts: PATCH /push/broadcasts/{id} replaces the message (title, body,
// image, data, link_data_key) and, when given, the send time of one that
// is scheduled or held and not yet released (docs/api.md#edit-a-scheduled-broadcast).
//
// HTTP only, like package server, which registers the route in its /push
// group behind its auth (a sender edits, as a sender cancels) and the
// broadcast's app check, and passes in the domain (the broadcast
// service), its strict decoding and the broadcast's rendering. The rule
// (what may change, and when) is the domain's: package broadcast checks
// the edit by the submit's rules, and package lease stores it only while
// no instance has started the broadcast.
package schedule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast/rules"
	"pushfan/model"
	"pushfan/server/apierror"
)

// Domain edits an unstarted broadcast: broadcast.Service (its refusals
// wrap rules.ErrStarted, ErrReleased and ErrNotEditable).
type Domain interface {
	Edit(ctx context.Context, id uint64, e rules.EditSpec) (*model.Broadcast, error)
}

// DomainOf is v's Domain (the server's submitter, when it is one), or nil.
func DomainOf(v any) Domain {
	d, _ := v.(Domain)
	return d
}

// Routes serve the edit.
type Routes struct {
	Domain Domain // nil: 503
	Decode func(body io.Reader, v any) error
	View   func(b *model.Broadcast) any
}

// Register serves the route in g (the /push group), behind mw (the
// broadcast's app check).
func (r *Routes) Register(g *echo.Group, mw ...echo.MiddlewareFunc) {
	g.PATCH("/broadcasts/:id", r.edit, mw...)
}

func (r *Routes) edit(c echo.Context) error {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return apierror.BadRequest("invalid_id", "id", "broadcast id %q is not a positive integer", c.Param("id"))
	}
	var spec rules.EditSpec
	if err := r.Decode(c.Request().Body, &spec); err != nil {
		return err
	}
	if r.Domain == nil {
		return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "editing broadcasts is not available on this server"}
	}
	b, err := r.Domain.Edit(c.Request().Context(), id, spec)
	switch {
	case errors.Is(err, rules.ErrStarted):
		return &apierror.Error{Status: http.StatusConflict, Code: "already_started",
			Message: "this broadcast can no longer be edited: it has started, was canceled, or has ended (" + err.Error() + ")"}
	case errors.Is(err, rules.ErrReleased):
		return &apierror.Error{Status: http.StatusConflict, Code: "already_released",
			Message: "an approver released this broadcast as it was; to change it, cancel it and submit it again for approval"}
	case errors.Is(err, rules.ErrEditFourEyes):
		return &apierror.Error{Status: http.StatusConflict, Code: "four_eyes_required",
			Message: "PUSHFAN_RELEASE_FOUR_EYES is on: a held broadcast awaits a second person's release of the text they read, so it is not edited; cancel it and submit the new text for approval"}
	case errors.Is(err, rules.ErrNotEditable):
		return &apierror.Error{Status: http.StatusConflict, Code: "not_editable",
			Message: "this broadcast cannot be edited (" + err.Error() + "); cancel it and submit it again"}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, r.View(b))
}
