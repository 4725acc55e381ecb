package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"pushfan/audience"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/rules"

	"github.com/labstack/echo/v4"
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
	// Category is the message category of its broadcasts (absent: the
	// request's, or default_category).
	Category string `json:"category,omitempty"`
}

// listAudiences lists the built-in and the named audiences.
func (s *Server) listAudiences(c echo.Context) error {
	out := struct {
		BuiltIn []string       `json:"built_in"`
		Named   []audienceView `json:"named"`
	}{BuiltIn: []string{"all", "user_ids"}, Named: []audienceView{}}
	apps, err := s.appFilter(c)
	if err != nil {
		return err
	}
	for _, a := range s.dom.Audiences.Load().List() {
		if apps == nil || slices.Contains(apps, a.App) {
			out.Named = append(out.Named, audienceView{Name: a.Name(), Description: a.Description(), Params: a.ParamTypes(), Vars: a.Vars(),
				FrequencyCap: a.FrequencyCap, App: a.App, Category: a.Category})
		}
	}
	return c.JSON(http.StatusOK, out)
}

// previewCapFields are the fields of a preview's body, besides its
// audience, that decide the cap a broadcast would be sent under: as a
// broadcast request names them.
type previewCapFields struct {
	FrequencyCap *bool    `json:"frequency_cap"`
	Class        string   `json:"class"`
	MaxRate      *float64 `json:"max_rate"`
	DeliverOver  string   `json:"deliver_over"`
	DryRun       bool     `json:"dry_run"`
	// Category decides whose consent counts (docs/consent.md).
	Category string `json:"category"`
}

func (f previewCapFields) query() reads.PreviewCap {
	return reads.PreviewCap{FrequencyCap: f.FrequencyCap, Class: f.Class, MaxRate: f.MaxRate, DeliverOver: f.DeliverOver, DryRun: f.DryRun, Category: f.Category}
}

// previewBody renders a preview: the cap fields say which cap the count
// of capped users is under (frequency_cap null, with the source saying
// why, when none applies, and capped_users null then).
func previewBody(p reads.Preview, out map[string]any) map[string]any {
	sample := p.Sample
	if sample == nil {
		sample = []uint64{}
	}
	out["count"], out["stale"], out["sample_user_ids"], out["capped_users"] = p.Count, p.Stale, sample, p.Capped
	out["category"], out["excluded_no_consent"], out["users"] = nil, p.ExcludedNoConsent, p.Users
	if p.Category != nil {
		out["category"] = p.Category.Name
	}
	out["frequency_cap"], out["frequency_cap_source"] = nil, p.Cap.Source
	if p.Cap.Spec != "" {
		out["frequency_cap"] = p.Cap.Spec
	}
	if p.Cap.Name != "" {
		out["frequency_cap_name"] = p.Cap.Name
	}
	return out
}

// previewAudience counts a named audience and samples its user ids,
// sending nothing: body {"params": {...}}, with the fields that decide its
// cap (frequency_cap, class, max_rate, deliver_over, dry_run) as a
// broadcast request would name them.
func (s *Server) previewAudience(c echo.Context) error {
	a, ok := s.dom.audience(c.Param("name"))
	if !ok {
		return &APIError{Status: http.StatusNotFound, Code: "unknown_audience", Message: "no audience named " + c.Param("name") + " is configured"}
	}
	var req struct {
		Params map[string]any `json:"params"`
		previewCapFields
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c.Request().Body, &req); err != nil {
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Code != "empty_body" {
				return err
			}
		}
	}
	// The audience's own app: its tokens, its caps.
	app := a.App
	if err := s.mayUseApp(c, app); err != nil {
		return err
	}
	bound, err := a.Bind(req.Params)
	if err != nil {
		return badRequest("invalid_params", "params", "%v", err)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.Timeouts.DB*6)
	defer cancel()
	q := req.query()
	q.App = app
	p, err := s.dom.Reader.Preview(ctx, bound, q, previewSample)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, previewBody(p, map[string]any{"audience": a.Name()}))
}

// previewSample is how many user ids a preview shows.
const previewSample = 10

// previewBroadcastAudience counts any audience a broadcast may name (all,
// user_ids, or a named one with params) and samples its user ids, sending
// nothing: POST /push/preview {"audience": {...}}, with the fields that
// decide its cap. Errors name the field as a broadcast request's would
// (audience.user_ids, audience.params.x, class).
func (s *Server) previewBroadcastAudience(c echo.Context) error {
	var req struct {
		App      string              `json:"app"`
		Audience *rules.AudienceSpec `json:"audience"`
		previewCapFields
	}
	if err := decodeStrict(c.Request().Body, &req); err != nil {
		return err
	}
	if err := s.mayUseApp(c, req.App); err != nil {
		return err
	}
	q := req.query()
	q.App = req.App
	p, err := s.dom.Reader.PreviewAudience(c.Request().Context(), req.Audience, q, previewSample)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, previewBody(p, map[string]any{}))
}

// reloadAudiences reloads the named audiences (PUSHFAN_CONFIG's
// audiences: read again and checked as at start-up): 200 with the names
// now current, or 422 reload_failed listing every problem, the current
// set kept. A POST: the sender role (docs/audiences-and-schema.md).
func (s *Server) reloadAudiences(c echo.Context) error {
	if s.dom.ReloadAudiences == nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "reload_unavailable", Message: "this instance cannot reload its audiences"}
	}
	set, err := s.dom.ReloadAudiences(c.Request().Context())
	var failed *audience.ReloadError
	if errors.As(err, &failed) {
		return &APIError{Status: http.StatusUnprocessableEntity, Code: "reload_failed", Problems: failed.Problems,
			Message: "the named audiences were not reloaded; the current ones stay: " + strings.Join(failed.Problems, "; ")}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"audiences": set.Names(), "reloaded_at": set.LoadedAt()})
}
