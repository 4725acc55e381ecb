package server

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
	"pushfan/engagement"
	"pushfan/server/events"
)

// WithEvents serves the apps' public engagement routes under /v1: the
// events they report, by in.
func WithEvents(in *engagement.Ingester) Option { return func(s *Server) { s.extra.events = in } }

// routeEvents adds the public routes (package events) when the
// engagement ingester is configured.
func (s *Server) routeEvents(e *echo.Echo) {
	if s.extra.events == nil {
		return
	}
	r := &events.Routes{Ingester: s.extra.events, Decode: decodeStrict, Origins: s.cfg.EventOrigins,
		PerAddress: s.cfg.Limits.EventsPerAddress, Log: s.log,
		ClickLink: func(ctx context.Context, id uint64, variant int, data bool) (string, error) {
			link, err := s.dom.Reader.ClickLink(ctx, id, variant, data)
			if errors.Is(err, broadcast.ErrNotFound) {
				return "", nil
			}
			return link, err
		}}
	r.Register(e)
}
