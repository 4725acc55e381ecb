package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"pushfan/broadcast"
	"pushfan/engagement"
	"pushfan/server/ratelimit"
	"pushfan/websdk"
)

// eventsBodyLimit bounds a POST /v1/events body: 100 events of a token
// (at most 120 bytes), a type and a time are about 25 KB.
const eventsBodyLimit = 64 << 10

// WithEvents serves the apps' public engagement routes under /v1: the
// events they report, by in.
func WithEvents(in *engagement.Ingester) Option { return func(s *Server) { s.extra.events = in } }

// routeEvents adds the public routes: no admin token (the event tokens are
// signed), CORS for PUSHFAN_EVENT_ORIGINS, and a budget per client
// address (an IPv6 address by its /64, as the authentication budget
// counts it: one host holds a whole /64 and could post from each of its
// addresses).
func (s *Server) routeEvents(e *echo.Echo) {
	if s.extra.events == nil {
		return
	}
	perSecond := s.cfg.Limits.EventsPerAddress
	addrs := ratelimit.New(perSecond*60, int(math.Ceil(2*perSecond)))
	limit := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := addrs.Reserve(ratelimit.AddrKey(c.RealIP()))
			if d := r.Delay(); d > 0 {
				r.Cancel()
				return rateLimited(c, d, "this address posted too many events")
			}
			return next(c)
		}
	}
	if len(s.cfg.EventOrigins) > 0 {
		// On the echo, not the group: a preflight OPTIONS matches no route
		// of the group, and must still be answered.
		e.Use(middleware.CORSWithConfig(middleware.CORSConfig{
			Skipper:      func(c echo.Context) bool { return !strings.HasPrefix(c.Request().URL.Path, "/v1/") },
			AllowOrigins: s.cfg.EventOrigins,
			AllowMethods: []string{http.MethodPost, http.MethodGet},
			AllowHeaders: []string{echo.HeaderContentType},
			MaxAge:       86400,
		}))
	}
	e.POST("/v1/events", s.postEvents, limit)
	// Clicks are not refused over the budget: the user gets to the link,
	// uncounted (see click).
	e.GET("/v1/c/:token", s.click(addrs, false))
	e.GET("/v1/c/:token/d", s.click(addrs, true))
	e.GET("/v1/sdk/pushfan.js", s.webSDK)
}

// webSDK serves the web SDK, an ES module: any origin may import it (a
// module script loaded from another origin needs CORS), and it is cached
// for an hour.
func (s *Server) webSDK(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", websdk.Module)
}

// click is the click redirect, GET /v1/c/{token} (a tracked message's web
// push link) and /v1/c/{token}/d (its data link): it counts a click (and
// an open) of the token's target, then answers 302 to the link stored
// with the broadcast, of the token's A/B variant. The target never comes
// from the request, so this is no open redirect. An expired token (an old
// notification), a test send's, or one over the address's budget still
// leads to the link, uncounted: a tap must reach its page. One that is not
// genuine leads nowhere.
func (s *Server) click(addrs *ratelimit.Keyed, data bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		tok := c.Param("token")
		claims, err := s.extra.events.Verify(tok)
		if err != nil {
			return &APIError{Status: http.StatusNotFound, Code: "unknown_link", Message: "this link is not one pushfan sent"}
		}
		link, err := s.dom.Reader.ClickLink(c.Request().Context(), claims.BroadcastID, claims.Variant, data)
		switch {
		case errors.Is(err, broadcast.ErrNotFound) || (err == nil && link == ""):
			return &APIError{Status: http.StatusNotFound, Code: "unknown_link", Message: "this link's broadcast is gone, or had no link"}
		case err != nil:
			return err
		}
		if r := addrs.Reserve(ratelimit.AddrKey(c.RealIP())); r.Delay() > 0 {
			r.Cancel()
		} else if a, err := s.extra.events.Ingest(c.Request().Context(), []engagement.RawEvent{{Token: tok, Type: "clicked"}}); err != nil {
			// The user gets to the link either way; the click goes uncounted.
			s.log.WarnContext(c.Request().Context(), "counting a click failed", "broadcast_id", claims.BroadcastID, "err", err)
		} else if len(a.Refused) > 0 {
			s.log.DebugContext(c.Request().Context(), "click not counted", "broadcast_id", claims.BroadcastID, "code", a.Refused[0].Code)
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.Redirect(http.StatusFound, link)
	}
}

type eventsRequest struct {
	Events []eventJSON `json:"events"`
}

type eventJSON struct {
	Token string `json:"token"`
	Type  string `json:"type"`
	At    string `json:"at,omitempty"`
}

type eventsAnswer struct {
	Accepted   int            `json:"accepted"`
	Duplicates int            `json:"duplicates"`
	Refused    []eventRefusal `json:"refused"`
}

type eventRefusal struct {
	Index int    `json:"index"`
	Code  string `json:"code"`
}

// postEvents takes up to engagement.MaxEvents events and answers once the
// genuine ones are stored: each event is accepted (counted), a duplicate
// (that target's event of that type was counted already) or refused with
// its code.
func (s *Server) postEvents(c echo.Context) error {
	body := http.MaxBytesReader(c.Response(), c.Request().Body, eventsBodyLimit)
	var req eventsRequest
	if err := decodeStrict(body, &req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &APIError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("the request body is larger than the %d-byte limit of an events post", eventsBodyLimit)}
		}
		return err
	}
	switch {
	case len(req.Events) == 0:
		return badRequest("invalid_events", "events", "events must hold 1 to %d events", engagement.MaxEvents)
	case len(req.Events) > engagement.MaxEvents:
		return badRequest("too_many_events", "events", "events holds %d events; at most %d a post", len(req.Events), engagement.MaxEvents)
	}
	raw := make([]engagement.RawEvent, len(req.Events))
	for i, ev := range req.Events {
		raw[i] = engagement.RawEvent{Token: ev.Token, Type: ev.Type, At: ev.At}
	}
	a, err := s.extra.events.Ingest(c.Request().Context(), raw)
	switch {
	case errors.Is(err, engagement.ErrStopping):
		return &APIError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "this instance is shutting down; retry the events on another instance"}
	case err != nil:
		s.log.WarnContext(c.Request().Context(), "storing events failed", "err", err)
		return &APIError{Status: http.StatusServiceUnavailable, Code: "events_not_stored", Message: "the events could not be stored; retry them"}
	}
	out := eventsAnswer{Accepted: a.Accepted, Duplicates: a.Duplicates, Refused: make([]eventRefusal, len(a.Refused))}
	for i, r := range a.Refused {
		out.Refused[i] = eventRefusal{Index: r.Index, Code: r.Code}
	}
	return c.JSON(http.StatusOK, out)
}
