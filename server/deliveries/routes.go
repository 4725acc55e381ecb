// Package deliveries is the API's routes of the kept outcomes
// (docs/api.md#a-users-deliveries): GET /push/users/{id}/deliveries, the
// user's recent broadcasts newest first with each of their devices'
// outcome, what support answers "did user 42 get Tuesday's push?" with;
// and GET /push/broadcasts/{id}/outcomes, a broadcast's targets streamed.
//
// HTTP only, like package server, which registers the route in its /push
// group behind its auth (a viewer reads) and passes in the domain: package
// outcomes' Reader. Every bad parameter is an *apierror.Error naming it.
package deliveries

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/lease/outcome"
	"pushfan/outcomes"
	"pushfan/server/apierror"
)

// Domain reads a user's deliveries and a broadcast's outcomes:
// outcomes.Reader.
type Domain interface {
	Deliveries(ctx context.Context, user uint64, limit int, after uint64) (outcomes.Page, error)
	Export(ctx context.Context, id uint64, kind outcome.Kind, fn func(outcomes.Line) error) error
}

// Routes serve a user's deliveries.
type Routes struct {
	Domain Domain
	// EveryApp refuses a caller limited to some apps: a user's
	// deliveries span every app's broadcasts.
	EveryApp echo.MiddlewareFunc
	// KnownCode says whether an export's ?code= is an error code pushfan
	// reports (fcm.IsKnownCode); nil takes any.
	KnownCode func(string) bool
}

// DefaultLimit is ?limit's default.
const DefaultLimit = 20

// Register serves the route in g (the /push group).
func (r *Routes) Register(g *echo.Group) {
	var mw []echo.MiddlewareFunc
	if r.EveryApp != nil {
		mw = append(mw, r.EveryApp)
	}
	g.GET("/users/:id/deliveries", r.list, mw...)
	g.GET("/broadcasts/:id/outcomes", r.export, mw...)
}

func (r *Routes) list(c echo.Context) error {
	user, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || user == 0 {
		return apierror.BadRequest("invalid_id", "id", "user id %q is not a positive integer", c.Param("id"))
	}
	limit := DefaultLimit
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > outcomes.MaxLimit {
			return apierror.BadRequest("invalid_value", "limit", "limit must be an integer from 1 to %d", outcomes.MaxLimit)
		}
		limit = n
	}
	var after uint64
	if q := c.QueryParam("after"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return apierror.BadRequest("invalid_value", "after", "after must be a broadcast id (next_after of the previous page)")
		}
		after = n
	}
	if r.Domain == nil {
		return unavailable()
	}
	page, err := r.Domain.Deliveries(c.Request().Context(), user, limit, after)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
