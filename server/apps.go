package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
)

// appView is one app in GET /push/apps.
type appView struct {
	Name      string  `json:"name"`
	ProjectID string  `json:"project_id"`
	RateLimit float64 `json:"rate_limit"`
}

// listApps answers the apps the caller may use (docs/apps.md).
func (s *Server) listApps(c echo.Context) error {
	out := struct {
		Apps []appView `json:"apps"`
	}{Apps: []appView{}}
	t := caller(c)
	for _, a := range s.dom.Apps.List {
		if t == nil || t.mayUse(a.Name) {
			out.Apps = append(out.Apps, appView(a))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// resolveApp is the app a request names, or the only app for "" ("" when
// it names none and there are several: the request rules refuse that).
func (s *Server) resolveApp(app string) string { return s.dom.Apps.of(app) }

// mayUseApp refuses (403) a token limited to other apps than app (a
// request's app field; "" is the only app, if there is one).
func (s *Server) mayUseApp(c echo.Context, app string) error {
	t := caller(c)
	app = s.resolveApp(app)
	if t == nil || app == "" || t.mayUse(app) {
		return nil
	}
	return forbiddenApp(t, app)
}

func forbiddenApp(p *Principal, app string) *APIError {
	return &APIError{Status: http.StatusForbidden, Code: "forbidden_app", Field: "app",
		Message: string(p.Kind) + " " + p.Name + " may not use app " + app + " (it is limited to its apps)"}
}

// appFilter is a list's or a count's apps: ?app= (a configured app the
// caller may use), else the caller's apps (nil: every app).
func (s *Server) appFilter(c echo.Context) ([]string, error) {
	t := caller(c)
	if q := c.QueryParam("app"); q != "" {
		if !s.knownApp(q) {
			return nil, badRequest("unknown_app", "app", "app %q is not configured", q)
		}
		if t != nil && !t.mayUse(q) {
			return nil, forbiddenApp(t, q)
		}
		return []string{q}, nil
	}
	if t == nil || t.Apps == nil {
		return nil, nil
	}
	return t.Apps, nil
}

func (s *Server) knownApp(app string) bool { return s.dom.Apps.known(app) }

// broadcastApp guards the routes of one broadcast (/push/broadcasts/:id…):
// a token limited to some apps gets 403 on a broadcast of another. Only
// such a token costs a read (the read cache's), before the handler's own.
// It fails closed: only a broadcast that does not exist goes on to the
// handler (its own 404); any other error reading the app (a timeout, a
// row that does not decode) refuses the request, since the handler may
// well act on the broadcast without that read (a cancel does).
func (s *Server) broadcastApp(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t := caller(c)
		if t == nil || t.Apps == nil {
			return next(c)
		}
		id, err := strconv.ParseUint(c.Param("id"), 10, 64)
		if err != nil || id == 0 {
			return next(c) // the handler's own 400
		}
		b, err := s.dom.Reader.Get(c.Request().Context(), id)
		switch {
		case errors.Is(err, broadcast.ErrNotFound):
			return next(c) // the handler's own 404
		case err != nil:
			return fmt.Errorf("checking broadcast %d's app for token %s: %w", id, t.Name, err)
		}
		if !t.mayUse(b.App) {
			return forbiddenApp(t, b.App)
		}
		return next(c)
	}
}

// everyApp refuses (403) a token limited to some apps: the route serves
// the whole deployment.
func everyApp(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if t := caller(c); t != nil && t.Apps != nil {
			return &APIError{Status: http.StatusForbidden, Code: "forbidden_app",
				Message: string(t.Kind) + " " + t.Name + " is limited to some apps; " + c.Path() + " serves every app"}
		}
		return next(c)
	}
}
