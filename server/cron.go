package server

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/cron"
)

// triggerJob runs a job now for an external scheduler:
// POST /internal/cron/{job} [{"fire_time": RFC 3339}]. Idempotent per job
// and fire time (default: the current minute).
func (s *Server) triggerJob(c echo.Context) error {
	var j *cron.Compiled
	for _, cj := range s.dom.Jobs {
		if cj.Name == c.Param("job") {
			j = cj
		}
	}
	if j == nil {
		return &APIError{Status: http.StatusNotFound, Code: "unknown_job", Message: "no job named " + c.Param("job") + " is configured"}
	}
	var req struct {
		FireTime string `json:"fire_time"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c.Request().Body, &req); err != nil {
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Code != "empty_body" {
				return err
			}
		}
	}
	fire := s.now().UTC().Truncate(time.Minute)
	if req.FireTime != "" {
		t, err := time.Parse(time.RFC3339Nano, req.FireTime)
		if err != nil {
			return badRequest("invalid_value", "fire_time", "fire_time must be an RFC 3339 time with an offset")
		}
		fire = t.UTC()
	}
	b, existing, err := s.dom.Submitter.FireJob(c.Request().Context(), j, fire)
	if err != nil {
		return err
	}
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
		audit.Created(c.Request().Context(), "broadcast", strconv.FormatUint(b.ID, 10)) // the repeat's entry names it
	}
	return c.JSON(http.StatusOK, s.view(b))
}

type jobView struct {
	Name      string      `json:"name"`
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	Enabled   bool        `json:"enabled"`
	Catchup   string      `json:"catchup"`
	NextFires []time.Time `json:"next_fires"`
	LastFire  *lastFire   `json:"last_fire"`
	// FrequencyCap names the cap of its broadcasts from the configuration
	// (a frequency_caps name, off or default); absent: the default.
	FrequencyCap string `json:"frequency_cap,omitempty"`
	// App is the app its broadcasts send for.
	App string `json:"app"`
	// Category is the message category of its broadcasts (absent: its
	// audience's, or default_category).
	Category string `json:"category,omitempty"`
}

type lastFire struct {
	FireTime    time.Time `json:"fire_time"`
	Skipped     bool      `json:"skipped"`
	BroadcastID uint64    `json:"broadcast_id,omitempty"`
	Status      string    `json:"status,omitempty"`
}

// listJobs shows every job: schedule, zone, next five fires, last fire.
func (s *Server) listJobs(c echo.Context) error {
	out := struct {
		Jobs []jobView `json:"jobs"`
	}{Jobs: []jobView{}}
	now := s.now()
	apps, err := s.appFilter(c)
	if err != nil {
		return err
	}
	for _, j := range s.dom.Jobs {
		app := s.dom.Apps.of(j.App)
		if apps != nil && !slices.Contains(apps, app) {
			continue
		}
		v := jobView{Name: j.Name, Schedule: j.Schedule, Timezone: j.Loc.String(), Enabled: j.Enabled(), Catchup: j.Catchup.String(), NextFires: j.NextN(now, 5),
			FrequencyCap: j.FrequencyCap, App: app, Category: j.Category}
		lf, err := s.dom.Reader.LastJobFire(c.Request().Context(), j.Name)
		if err != nil {
			return err
		}
		if !lf.FireTime.IsZero() {
			v.LastFire = &lastFire{FireTime: lf.FireTime, Skipped: lf.Broadcast == nil}
			if lf.Broadcast != nil {
				v.LastFire.BroadcastID, v.LastFire.Status = lf.Broadcast.ID, string(lf.Broadcast.Status)
			}
		}
		out.Jobs = append(out.Jobs, v)
	}
	return c.JSON(http.StatusOK, out)
}
