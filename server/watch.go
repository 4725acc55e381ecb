package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/live"
)

// watchBroadcast streams a broadcast's state as server-sent events
// (GET /push/broadcasts/{id}/events), from the live-watch hub: an event
// "state" about once a second, the last one when it is final, then the
// stream ends.
func (s *Server) watchBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	b, err := s.dom.Reader.Peek(ctx, id) // an unknown id is a 404, before the stream starts
	if err != nil {
		return err
	}
	// A console session's stream ends with the session: when it expires,
	// when it signs out (at once here, at the next ping elsewhere), and
	// when its token goes (at the next ping).
	sess, _ := c.Get(sessionKey).(*model.Session)
	signedIn := func() bool {
		live, t, err := s.session(c)
		return err != nil || (live != nil && t != nil) // a failed read keeps the stream
	}
	err = s.console.watch.Serve(ctx, c.Response(), b, sess, signedIn)
	if errors.Is(err, live.ErrStopped) {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "this instance is shutting down; reconnect"}
	}
	return err
}
