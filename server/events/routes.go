// Package events is the API's public routes under /v1, which the apps
// call without an admin token (docs/engagement.md): the engagement events
// they report (POST /v1/events), the click redirect of a tracked link
// (GET /v1/c/{token}), and the web SDK (GET /v1/sdk/pushfan.js).
//
// HTTP only, like package server, which registers the routes when the
// engagement ingester is configured and passes in its strict decoding,
// the broadcasts' click links and its logger.
package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"pushfan/engagement"
	"pushfan/server/apierror"
	"pushfan/server/ratelimit"
	"pushfan/websdk"
)

// eventsBodyLimit bounds a POST /v1/events body: 100 events of a token
// (at most 120 bytes), a type and a time are about 25 KB.
const eventsBodyLimit = 64 << 10

// Routes serve the public routes.
type Routes struct {
	Ingester *engagement.Ingester
	// ClickLink is the link a broadcast's variant sends a click to (its
	// data link when data is true); "" for a broadcast that is gone or
	// had no link.
	ClickLink func(ctx context.Context, id uint64, variant int, data bool) (string, error)
	// Decode decodes a request body strictly.
	Decode func(body io.Reader, v any) error
	// Origins may call the routes from a browser (CORS;
	// PUSHFAN_EVENT_ORIGINS), and PerAddress is each client address's
	// budget of events a second (PUSHFAN_EVENTS_PER_ADDRESS).
	Origins    []string
	PerAddress float64
	Log        *slog.Logger
}

// Register adds the public routes: no admin token (the event tokens are
// signed), CORS for PUSHFAN_EVENT_ORIGINS, and a budget per client
// address (an IPv6 address by its /64, as the authentication budget
// counts it: one host holds a whole /64 and could post from each of its
// addresses).
func (r *Routes) Register(e *echo.Echo) {
	perSecond := r.PerAddress
	addrs := ratelimit.New(perSecond*60, int(math.Ceil(2*perSecond)))
	limit := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res := addrs.Reserve(ratelimit.AddrKey(c.RealIP()))
			if d := res.Delay(); d > 0 {
				res.Cancel()
				return apierror.RateLimited(c.Response().Header(), d, "this address posted too many events")
			}
			return next(c)
		}
	}
	if len(r.Origins) > 0 {
		// On the echo, not the group: a preflight OPTIONS matches no route
		// of the group, and must still be answered.
		e.Use(middleware.CORSWithConfig(middleware.CORSConfig{
			Skipper:      func(c echo.Context) bool { return !strings.HasPrefix(c.Request().URL.Path, "/v1/") },
			AllowOrigins: r.Origins,
			AllowMethods: []string{http.MethodPost, http.MethodGet},
			AllowHeaders: []string{echo.HeaderContentType},
			MaxAge:       86400,
		}))
	}
	e.POST("/v1/events", r.post, limit)
	// Clicks are not refused over the budget: the user gets to the link,
	// uncounted (see click).
	e.GET("/v1/c/:token", r.click(addrs, false))
	e.GET("/v1/c/:token/d", r.click(addrs, true))
	e.GET("/v1/sdk/pushfan.js", r.webSDK)
}

// webSDK serves the web SDK, an ES module: any origin may import it (a
// module script loaded from another origin needs CORS), and it is cached
// for an hour.
func (r *Routes) webSDK(c echo.Context) error {
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
func (r *Routes) click(addrs *ratelimit.Keyed, data bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		tok := c.Param("token")
		claims, err := r.Ingester.Verify(tok)
		if err != nil {
			return &apierror.Error{Status: http.StatusNotFound, Code: "unknown_link", Message: "this link is not one pushfan sent"}
		}
		link, err := r.ClickLink(c.Request().Context(), claims.BroadcastID, claims.Variant, data)
		switch {
		case err == nil && link == "":
			return &apierror.Error{Status: http.StatusNotFound, Code: "unknown_link", Message: "this link's broadcast is gone, or had no link"}
		case err != nil:
			return err
		}
		if res := addrs.Reserve(ratelimit.AddrKey(c.RealIP())); res.Delay() > 0 {
			res.Cancel()
		} else if a, err := r.Ingester.Ingest(c.Request().Context(), []engagement.RawEvent{{Token: tok, Type: "clicked"}}); err != nil {
			// The user gets to the link either way; the click goes uncounted.
			r.Log.WarnContext(c.Request().Context(), "counting a click failed", "broadcast_id", claims.BroadcastID, "err", err)
		} else if len(a.Refused) > 0 {
			r.Log.DebugContext(c.Request().Context(), "click not counted", "broadcast_id", claims.BroadcastID, "code", a.Refused[0].Code)
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

// post takes up to engagement.MaxEvents events and answers once the
// genuine ones are stored: each event is accepted (counted), a duplicate
// (that target's event of that type was counted already) or refused with
// its code.
func (r *Routes) post(c echo.Context) error {
	body := http.MaxBytesReader(c.Response(), c.Request().Body, eventsBodyLimit)
	var req eventsRequest
	if err := r.Decode(body, &req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apierror.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("the request body is larger than the %d-byte limit of an events post", eventsBodyLimit)}
		}
		return err
	}
	switch {
	case len(req.Events) == 0:
		return apierror.BadRequest("invalid_events", "events", "events must hold 1 to %d events", engagement.MaxEvents)
	case len(req.Events) > engagement.MaxEvents:
		return apierror.BadRequest("too_many_events", "events", "events holds %d events; at most %d a post", len(req.Events), engagement.MaxEvents)
	}
	raw := make([]engagement.RawEvent, len(req.Events))
	for i, ev := range req.Events {
		raw[i] = engagement.RawEvent{Token: ev.Token, Type: ev.Type, At: ev.At}
	}
	a, err := r.Ingester.Ingest(c.Request().Context(), raw)
	switch {
	case errors.Is(err, engagement.ErrStopping):
		return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "this instance is shutting down; retry the events on another instance"}
	case err != nil:
		r.Log.WarnContext(c.Request().Context(), "storing events failed", "err", err)
		return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "events_not_stored", Message: "the events could not be stored; retry them"}
	}
	out := eventsAnswer{Accepted: a.Accepted, Duplicates: a.Duplicates, Refused: make([]eventRefusal, len(a.Refused))}
	for i, ref := range a.Refused {
		out.Refused[i] = eventRefusal{Index: ref.Index, Code: ref.Code}
	}
	return c.JSON(http.StatusOK, out)
}
