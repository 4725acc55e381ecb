// Package jobs is the API's routes of the cron jobs (docs/cron.md):
// GET /push/cron lists each job with its next fires and its last fire,
// and POST /internal/cron/{job} fires one now for an external scheduler.
//
// HTTP only, like package server, which registers the routes (the list
// in its /push group, the trigger behind the internal token) and passes
// in the jobs, the domain's calls, its strict decoding, its clock, the
// broadcast's rendering and the caller's apps.
package jobs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/cron"
	"pushfan/model"
	"pushfan/server/apierror"
)

// Routes serve the cron jobs.
type Routes struct {
	Jobs []*cron.Compiled
	// Fire makes the job's broadcast of fire time at (existing: it was
	// made already: the trigger is idempotent per job and fire time).
	Fire func(ctx context.Context, j *cron.Compiled, at time.Time) (b *model.Broadcast, existing bool, err error)
	// LastFire is the job's last fire, if any.
	LastFire func(ctx context.Context, job string) (model.LastFire, error)
	// View renders a broadcast as the API answers it.
	View func(b *model.Broadcast) any
	// AppFilter is the apps the caller may see (nil: every app), AppOf a
	// job's app by its configured name ("": the only app).
	AppFilter func(c echo.Context) ([]string, error)
	AppOf     func(app string) string
	Decode    func(body io.Reader, v any) error
	Now       func() time.Time
}

// RegisterList adds GET /cron to g; RegisterTrigger adds POST
// /cron/:job to g.
func (r *Routes) RegisterList(g *echo.Group)    { g.GET("/cron", r.list) }
func (r *Routes) RegisterTrigger(g *echo.Group) { g.POST("/cron/:job", r.trigger) }

// trigger runs a job now for an external scheduler:
// POST /internal/cron/{job} [{"fire_time": RFC 3339}]. Idempotent per job
// and fire time (default: the current minute).
func (r *Routes) trigger(c echo.Context) error {
	var j *cron.Compiled
	for _, cj := range r.Jobs {
		if cj.Name == c.Param("job") {
			j = cj
		}
	}
	if j == nil {
		return &apierror.Error{Status: http.StatusNotFound, Code: "unknown_job", Message: "no job named " + c.Param("job") + " is configured"}
	}
	var req struct {
		FireTime string `json:"fire_time"`
	}
	if c.Request().ContentLength != 0 {
		if err := r.Decode(c.Request().Body, &req); err != nil {
			var apiErr *apierror.Error
			if !errors.As(err, &apiErr) || apiErr.Code != "empty_body" {
				return err
			}
		}
	}
	fire := r.Now().UTC().Truncate(time.Minute)
	if req.FireTime != "" {
		t, err := time.Parse(time.RFC3339Nano, req.FireTime)
		if err != nil {
			return apierror.BadRequest("invalid_value", "fire_time", "fire_time must be an RFC 3339 time with an offset")
		}
		fire = t.UTC()
	}
	b, existing, err := r.Fire(c.Request().Context(), j, fire)
	if err != nil {
		return err
	}
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
		audit.Created(c.Request().Context(), "broadcast", strconv.FormatUint(b.ID, 10)) // the repeat's entry names it
	}
	return c.JSON(http.StatusOK, r.View(b))
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

// list shows every job: schedule, zone, next five fires, last fire.
func (r *Routes) list(c echo.Context) error {
	out := struct {
		Jobs []jobView `json:"jobs"`
	}{Jobs: []jobView{}}
	now := r.Now()
	apps, err := r.AppFilter(c)
	if err != nil {
		return err
	}
	for _, j := range r.Jobs {
		app := r.AppOf(j.App)
		if apps != nil && !slices.Contains(apps, app) {
			continue
		}
		v := jobView{Name: j.Name, Schedule: j.Schedule, Timezone: j.Loc.String(), Enabled: j.Enabled(), Catchup: j.Catchup.String(), NextFires: j.NextN(now, 5),
			FrequencyCap: j.FrequencyCap, App: app, Category: j.Category}
		lf, err := r.LastFire(c.Request().Context(), j.Name)
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
