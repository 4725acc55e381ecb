// Package jobs is the API's routes of the cron jobs (docs/cron.md):
// GET /push/cron lists each job with its message, audience, next fires,
// last fire and pause; POST /push/cron/{job}/pause, /resume and /run are
// an admin's controls (pause on every instance, run once now); and POST
// /internal/cron/{job} fires one now for an external scheduler.
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
	// Control pauses, resumes and runs jobs (the broadcast service); nil:
	// the controls answer 503 and the list shows no job paused.
	Control Control
	// Actor names the caller (paused_by).
	Actor func(c echo.Context) string
}

// Control is the domain's side of the admin's controls: broadcast.Service.
type Control interface {
	// RunJob fires j once now, paused or not (existing: a click of the
	// same minute made it already).
	RunJob(ctx context.Context, j *cron.Compiled) (b *model.Broadcast, existing bool, err error)
	// PauseJob pauses or resumes a job on every instance; changed is
	// false when it was so already.
	PauseJob(ctx context.Context, job string, paused bool, by string) (changed bool, err error)
	JobPauses(ctx context.Context) (map[string]model.JobPause, error)
}

// ControlOf is v's Control (the server's submitter, when it is one), or nil.
func ControlOf(v any) Control {
	c, _ := v.(Control)
	return c
}

// RegisterList adds GET /cron and the admin's controls, POST
// /cron/:job/pause, /resume and /run, to g; RegisterTrigger adds POST
// /cron/:job to g.
func (r *Routes) RegisterList(g *echo.Group) {
	g.GET("/cron", r.list)
	g.POST("/cron/:job/pause", func(c echo.Context) error { return r.pause(c, true) })
	g.POST("/cron/:job/resume", func(c echo.Context) error { return r.pause(c, false) })
	g.POST("/cron/:job/run", r.run)
}
func (r *Routes) RegisterTrigger(g *echo.Group) { g.POST("/cron/:job", r.trigger) }

// trigger runs a job now for an external scheduler:
// POST /internal/cron/{job} [{"fire_time": RFC 3339}]. Idempotent per job
// and fire time (default: the current minute).
func (r *Routes) trigger(c echo.Context) error {
	j, err := r.job(c)
	if err != nil {
		return err
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
	if errors.Is(err, cron.ErrJobPaused) {
		return &apierror.Error{Status: http.StatusConflict, Code: "job_paused",
			Message: "job " + j.Name + " is paused: resume it (POST /push/cron/" + j.Name + "/resume) or run it once (POST /push/cron/" + j.Name + "/run)"}
	}
	return r.answer(c, b, existing, err)
}

// answer is a fire's answer: the broadcast, marked replayed when the
// fire had been made already.
func (r *Routes) answer(c echo.Context, b *model.Broadcast, existing bool, err error) error {
	if err != nil {
		return err
	}
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
		audit.Created(c.Request().Context(), "broadcast", strconv.FormatUint(b.ID, 10)) // the repeat's entry names it
	}
	return c.JSON(http.StatusOK, r.View(b))
}

// job is the configured job the path names, or a 404.
func (r *Routes) job(c echo.Context) (*cron.Compiled, error) {
	for _, cj := range r.Jobs {
		if cj.Name == c.Param("job") {
			return cj, nil
		}
	}
	return nil, &apierror.Error{Status: http.StatusNotFound, Code: "unknown_job", Message: "no job named " + c.Param("job") + " is configured"}
}

// control is the job the path names, if the caller may use its app and
// the controls are there.
func (r *Routes) control(c echo.Context) (*cron.Compiled, error) {
	j, err := r.job(c)
	if err != nil {
		return nil, err
	}
	apps, err := r.AppFilter(c)
	if err != nil {
		return nil, err
	}
	if apps != nil && !slices.Contains(apps, r.AppOf(j.App)) {
		return nil, &apierror.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "job " + j.Name + " sends for app " + r.AppOf(j.App) + ", which this caller may not use"}
	}
	if r.Control == nil {
		return nil, &apierror.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the job controls are not available on this server"}
	}
	return j, nil
}

// run fires a job once now: POST /push/cron/{job}/run. Two clicks in one
// minute answer one broadcast (Idempotent-Replayed on the second).
func (r *Routes) run(c echo.Context) error {
	j, err := r.control(c)
	if err != nil {
		return err
	}
	b, existing, err := r.Control.RunJob(c.Request().Context(), j)
	return r.answer(c, b, existing, err)
}

// pause pauses or resumes a job: POST /push/cron/{job}/pause|resume. It
// answers the job as the list shows it; a repeat changes nothing.
func (r *Routes) pause(c echo.Context, paused bool) error {
	j, err := r.control(c)
	if err != nil {
		return err
	}
	by := ""
	if r.Actor != nil {
		by = r.Actor(c)
	}
	if _, err := r.Control.PauseJob(c.Request().Context(), j.Name, paused, by); err != nil {
		return err
	}
	pauses, err := r.Control.JobPauses(c.Request().Context())
	if err != nil {
		return err
	}
	v, err := r.view(c.Request().Context(), j, r.Now(), pauses)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
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
	// Message is what it sends (title, body, image, data); Audience who
	// to, as configured.
	Message  jobMessage     `json:"message"`
	Audience map[string]any `json:"audience"`
	// Paused: an admin paused it (on every instance), when and by whom.
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
	PausedBy string     `json:"paused_by,omitempty"`
}

type jobMessage struct {
	Title string            `json:"title,omitempty"`
	Body  string            `json:"body,omitempty"`
	Image string            `json:"image,omitempty"`
	Data  map[string]string `json:"data,omitempty"`
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
	pauses := map[string]model.JobPause{}
	if r.Control != nil && len(r.Jobs) > 0 {
		if pauses, err = r.Control.JobPauses(c.Request().Context()); err != nil {
			return err
		}
	}
	for _, j := range r.Jobs {
		if apps != nil && !slices.Contains(apps, r.AppOf(j.App)) {
			continue
		}
		v, err := r.view(c.Request().Context(), j, now, pauses)
		if err != nil {
			return err
		}
		out.Jobs = append(out.Jobs, v)
	}
	return c.JSON(http.StatusOK, out)
}

// view is job j as the list shows it.
func (r *Routes) view(ctx context.Context, j *cron.Compiled, now time.Time, pauses map[string]model.JobPause) (jobView, error) {
	m := j.Message
	v := jobView{Name: j.Name, Schedule: j.Schedule, Timezone: j.Loc.String(), Enabled: j.Enabled(), Catchup: j.Catchup.String(), NextFires: j.NextN(now, 5),
		FrequencyCap: j.FrequencyCap, App: r.AppOf(j.App), Category: j.Category,
		Message:  jobMessage{Title: m.Title, Body: m.Body, Image: m.Image, Data: m.Data},
		Audience: j.Audience}
	if p, ok := pauses[j.Name]; ok {
		at := p.At
		v.Paused, v.PausedAt, v.PausedBy = true, &at, p.By
	}
	lf, err := r.LastFire(ctx, j.Name)
	if err != nil {
		return v, err
	}
	if !lf.FireTime.IsZero() {
		v.LastFire = &lastFire{FireTime: lf.FireTime, Skipped: lf.Broadcast == nil}
		if lf.Broadcast != nil {
			v.LastFire.BroadcastID, v.LastFire.Status = lf.Broadcast.ID, string(lf.Broadcast.Status)
		}
	}
	return v, nil
}
