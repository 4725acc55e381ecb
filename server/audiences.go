package server

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
)

type audienceView struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Params      map[string]string `json:"params"`
	Vars        []string          `json:"vars"`
	// FrequencyCap names the cap of its broadcasts from the configuration
	// (a frequency_caps name, off or default); absent: the default.
	FrequencyCap string `json:"frequency_cap,omitempty"`
	// App is the app whose tokens it returns.
	App string `json:"app"`
}

// listAudiences lists the built-in and the named audiences.
func (s *Server) listAudiences(c echo.Context) error {
	out := struct {
		BuiltIn []string       `json:"built_in"`
		Named   []audienceView `json:"named"`
	}{BuiltIn: []string{"all", "user_ids"}, Named: []audienceView{}}
	all := s.cfg.AllAudiences()
	capOf := make(map[string]string, len(all))
	appOf := make(map[string]string, len(all))
	for _, a := range all {
		capOf[a.Name] = a.FrequencyCap
		appOf[a.Name] = s.cfg.AppOf(a.App)
	}
	apps, err := s.appFilter(c)
	if err != nil {
		return err
	}
	for _, a := range s.audienceList {
		if app := appOf[a.Name()]; apps == nil || slices.Contains(apps, app) {
			out.Named = append(out.Named, audienceView{Name: a.Name(), Description: a.Description(), Params: a.ParamTypes(), Vars: a.Vars(),
				FrequencyCap: capOf[a.Name()], App: app})
		}
	}
	return c.JSON(http.StatusOK, out)
}

// previewAudience counts a named audience and samples its user ids,
// sending nothing: body {"params": {...}}.
func (s *Server) previewAudience(c echo.Context) error {
	a, ok := s.audiences[c.Param("name")]
	if !ok {
		return &APIError{Status: http.StatusNotFound, Code: "unknown_audience", Message: "no audience named " + c.Param("name") + " is configured"}
	}
	var req struct {
		Params map[string]any `json:"params"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c.Request().Body, &req); err != nil {
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Code != "empty_body" {
				return err
			}
		}
	}
	for _, ca := range s.cfg.AllAudiences() {
		if ca.Name == a.Name() {
			if err := s.mayUseApp(c, s.cfg.AppOf(ca.App)); err != nil {
				return err
			}
		}
	}
	bound, err := a.Bind(req.Params)
	if err != nil {
		return badRequest("invalid_params", "params", "%v", err)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.DB.Timeout*6)
	defer cancel()
	count, sample, err := s.svc.Preview(ctx, bound, previewSample)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"audience": a.Name(), "count": count, "sample_user_ids": sample})
}

// previewSample is how many user ids a preview shows.
const previewSample = 10

// previewBroadcastAudience counts any audience a broadcast may name (all,
// user_ids, or a named one with params) and samples its user ids, sending
// nothing: POST /push/preview {"audience": {...}}. Errors name the field as
// a broadcast request's would (audience.user_ids, audience.params.x).
func (s *Server) previewBroadcastAudience(c echo.Context) error {
	var req struct {
		App      string                  `json:"app"`
		Audience *broadcast.AudienceSpec `json:"audience"`
	}
	if err := decodeStrict(c.Request().Body, &req); err != nil {
		return err
	}
	if err := s.mayUseApp(c, req.App); err != nil {
		return err
	}
	count, sample, err := s.svc.PreviewAudience(c.Request().Context(), req.App, req.Audience, previewSample)
	if err != nil {
		return err
	}
	if sample == nil {
		sample = []uint64{}
	}
	capped, err := s.svc.PreviewCapped(c.Request().Context(), req.App, req.Audience)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"count": count, "sample_user_ids": sample, "capped_users": capped})
}
