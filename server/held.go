package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
)

// releaseBroadcast lets a held broadcast go: 200 with the broadcast object,
// now queued (or scheduled, when its send_at is still ahead). Viewers are
// refused by requireBearer like on every other POST.
func (s *Server) releaseBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	var by string
	if t := caller(c); t != nil {
		by = t.Name
	}
	b, err := s.dom.Submitter.Release(c.Request().Context(), id, by)
	switch {
	case errors.Is(err, broadcast.ErrNotHeld):
		return &APIError{Status: http.StatusConflict, Code: "not_held", Message: "only a held broadcast can be released: " + err.Error()}
	case errors.Is(err, broadcast.ErrFourEyes):
		return &APIError{Status: http.StatusForbidden, Code: "four_eyes_required",
			Message: "PUSHFAN_RELEASE_FOUR_EYES is on: a held broadcast must be released by another token than the one that created it (" + by + ")"}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, s.view(b))
}
