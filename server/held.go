package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/broadcast"
	"pushfan/model"
)

// releaseBroadcast lets a held broadcast go: 200 with the broadcast object,
// now queued (or scheduled, when its send_at is still ahead). Only an
// approver or an admin gets here (neededRole); with four-eyes on, not the
// broadcast's creator (broadcast.Service.Release compares the actors).
func (s *Server) releaseBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	by := callerActor(c)
	b, err := s.dom.Submitter.Release(c.Request().Context(), id, by)
	switch {
	case errors.Is(err, broadcast.ErrNotHeld):
		return &APIError{Status: http.StatusConflict, Code: "not_held", Message: "only a held broadcast can be released: " + err.Error()}
	case errors.Is(err, broadcast.ErrFourEyes):
		if p := caller(c); p != nil {
			s.record(c, model.AuditEntry{Actor: p.Actor, Action: audit.BroadcastReleaseRefused, Target: "broadcast:" + c.Param("id"),
				Detail: detail(map[string]any{"rule": "four_eyes"})})
		}
		return &APIError{Status: http.StatusForbidden, Code: "four_eyes_required",
			Message: "PUSHFAN_RELEASE_FOUR_EYES is on: a held broadcast must be released by another person, key or token than the one that created it (" + string(by.Kind) + " " + by.Name + "), whatever its role"}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, s.view(b))
}
