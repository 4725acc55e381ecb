package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast"
	"pushfan/cron"
	"pushfan/repository"
)

// jobRequest turns one fire of a job into a validated broadcast request.
// The idempotency key "cron:<job>:<fire time>" is what makes each fire one
// broadcast however many instances (or external triggers) fire it.
func (s *Server) jobRequest(j *cron.Compiled, fire time.Time) (broadcast.Request, error) {
	raw, err := json.Marshal(j.Audience)
	if err != nil {
		return broadcast.Request{}, fmt.Errorf("job %s: audience: %w", j.Name, err)
	}
	var ar audienceRequest
	if err := decodeStrict(bytes.NewReader(raw), &ar); err != nil {
		return broadcast.Request{}, fmt.Errorf("job %s: audience: %w", j.Name, err)
	}
	req := broadcastRequest{Title: j.Message.Title, Body: j.Message.Body, Image: j.Message.Image, Data: j.Message.Data, Audience: &ar}
	in, err := req.validateAt(s.cfg.Engine.MaxUserIDs, time.Time{}, 0, s.audiences)
	if err != nil {
		return in, fmt.Errorf("job %s: %w", j.Name, err)
	}
	ft := fire.UTC()
	in.Trigger, in.JobName, in.FireTime, in.CreatedBy = "cron", j.Name, &ft, "cron"
	in.IdempotencyKey = "cron:" + j.Name + ":" + ft.Format(time.RFC3339Nano)
	in.RequestHash = requestHash(in)
	return in, nil
}

// CheckJobs validates every job's message and audience as a request would
// be, so a bad job stops start-up instead of failing at its first fire.
func (s *Server) CheckJobs() error {
	var errs []error
	for _, j := range s.jobs {
		if _, err := s.jobRequest(j, time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Server) fireJob(ctx context.Context, j *cron.Compiled, fire time.Time) (*repository.Broadcast, bool, error) {
	in, err := s.jobRequest(j, fire)
	if err != nil {
		return nil, false, err
	}
	return s.svc.Submit(ctx, in)
}

// Scheduler fires the enabled jobs on time on every instance; MySQL keeps
// one broadcast per job and fire time. Start it once; Stop waits for it.
type Scheduler struct {
	s       *Server
	stop    chan struct{}
	done    chan struct{}
	started bool
	once    sync.Once
}

// Scheduler returns the job scheduler of this server.
func (s *Server) Scheduler() *Scheduler {
	return &Scheduler{s: s, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start catches up on missed fires and then fires jobs as they come due.
func (sc *Scheduler) Start() {
	sc.started = true
	go func() {
		defer close(sc.done)
		sc.run()
	}()
}

// Stop ends the scheduler and waits for it; safe twice.
func (sc *Scheduler) Stop() {
	sc.once.Do(func() { close(sc.stop) })
	if sc.started {
		<-sc.done
	}
}

func (sc *Scheduler) run() {
	s := sc.s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sc.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	now := s.now()
	due := map[*cron.Compiled]time.Time{}
	for _, j := range s.jobs {
		if !j.Enabled() {
			continue
		}
		sc.catchUp(ctx, j, now)
		due[j] = j.Next(now)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for len(due) > 0 {
		var next time.Time
		for _, t := range due {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if next.IsZero() {
			return
		}
		timer.Reset(time.Until(next))
		select {
		case <-sc.stop:
			return
		case <-timer.C:
		}
		for j, t := range due {
			if t.Equal(next) {
				sc.fire(ctx, j, t)
				due[j] = j.Next(t)
			}
		}
	}
}

// catchUp runs the newest fire missed while every instance was down, if
// it is within the job's catch-up window, and records the others skipped.
func (sc *Scheduler) catchUp(ctx context.Context, j *cron.Compiled, now time.Time) {
	s := sc.s
	lf, err := s.svc.LastJobFire(ctx, j.Name)
	if err != nil {
		s.log.Error("reading a job's last fire; not catching up", "job", j.Name, "err", err)
		return
	}
	run, skipped := j.Missed(lf.FireTime, now)
	if len(skipped) > 0 {
		if err := s.svc.RecordSkippedFires(ctx, j.Name, skipped, "missed while every instance was down, beyond the catch-up window"); err != nil {
			s.log.Error("recording skipped fires", "job", j.Name, "err", err)
		}
		s.log.Warn("skipped missed fires", "job", j.Name, "count", len(skipped), "newest", skipped[len(skipped)-1])
	}
	if !run.IsZero() {
		s.log.Info("catching up on a missed fire", "job", j.Name, "fire_time", run)
		sc.fire(ctx, j, run)
	}
}

func (sc *Scheduler) fire(ctx context.Context, j *cron.Compiled, t time.Time) {
	b, existing, err := sc.s.fireJob(ctx, j, t)
	switch {
	case errors.Is(err, broadcast.ErrIdempotencyConflict):
		sc.s.log.Warn("this fire was already started by an instance with a different job definition", "job", j.Name, "fire_time", t)
	case err != nil:
		sc.s.log.Error("job fire failed", "job", j.Name, "fire_time", t, "err", err)
	case !existing:
		sc.s.log.Info("job fired", "job", j.Name, "fire_time", t, "broadcast_id", b.ID)
	}
}

// triggerJob runs a job now for an external scheduler:
// POST /internal/cron/{job} [{"fire_time": RFC 3339}]. Idempotent per job
// and fire time (default: the current minute).
func (s *Server) triggerJob(c echo.Context) error {
	var j *cron.Compiled
	for _, cj := range s.jobs {
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
	b, existing, err := s.fireJob(c.Request().Context(), j, fire)
	if err != nil {
		return err
	}
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSON(http.StatusOK, viewOf(b, s.now()))
}

type jobView struct {
	Name      string      `json:"name"`
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	Enabled   bool        `json:"enabled"`
	Catchup   string      `json:"catchup"`
	NextFires []time.Time `json:"next_fires"`
	LastFire  *lastFire   `json:"last_fire"`
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
	for _, j := range s.jobs {
		v := jobView{Name: j.Name, Schedule: j.Schedule, Timezone: j.Loc.String(), Enabled: j.Enabled(), Catchup: j.Catchup.String(), NextFires: j.NextN(now, 5)}
		lf, err := s.svc.LastJobFire(c.Request().Context(), j.Name)
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
