package cron

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"pushfan/internal/platform/lifecycle"
)

// ErrFireConflict: the fire was already started by an instance with a
// different definition of the job (a rolling deploy that changed it).
var ErrFireConflict = errors.New("fire already started with a different job definition")

// Submitter turns fires into broadcasts; the broadcast service is one. A
// fire must become exactly one broadcast however many instances fire it
// (the service keys it on job and fire time). The scheduler fires on time
// and the Submitter spreads the start (the broadcast service stores the
// fire scheduled at fire time plus a per-fire offset, PUSHFAN_START_SPREAD),
// so that the fire time and its idempotency key stay the schedule's and an
// external trigger's fires are spread the same way.
type Submitter interface {
	// FireJob starts the fire at of j; existing reports a fire some
	// instance had started already.
	FireJob(ctx context.Context, j *Compiled, at time.Time) (broadcastID uint64, existing bool, err error)
	// LastFireTime is the job's latest fire, started or skipped (zero if none).
	LastFireTime(ctx context.Context, job string) (time.Time, error)
	// RecordSkippedFires notes fires that will not run.
	RecordSkippedFires(ctx context.Context, job string, fires []time.Time, reason string) error
}

// Scheduler fires the enabled jobs on time. Every instance runs one; the
// Submitter keeps one broadcast per job and fire time. At start it catches
// up on a fire missed while every instance was down (see Compiled.Missed).
type Scheduler struct {
	jobs []*Compiled
	sub  Submitter
	log  *slog.Logger
	now  func() time.Time

	loop lifecycle.Loop
}

// NewScheduler returns a Scheduler for jobs; Start runs it.
func NewScheduler(jobs []*Compiled, sub Submitter, log *slog.Logger) *Scheduler {
	return &Scheduler{jobs: jobs, sub: sub, log: log, now: time.Now}
}

// Start runs the scheduler until Stop or ctx ends. Starting twice, or
// after Stop, does nothing.
func (sc *Scheduler) Start(ctx context.Context) { sc.loop.Start(ctx, sc.run) }

// Stop ends the scheduler, aborting a fire in progress, and waits for it
// up to ctx's deadline. Safe twice, and before Start.
func (sc *Scheduler) Stop(ctx context.Context) error { return sc.loop.Stop(ctx) }

func (sc *Scheduler) run(ctx context.Context) {
	now := sc.now()
	due := map[*Compiled]time.Time{}
	for _, j := range sc.jobs {
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
		case <-ctx.Done():
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
func (sc *Scheduler) catchUp(ctx context.Context, j *Compiled, now time.Time) {
	last, err := sc.sub.LastFireTime(ctx, j.Name)
	if err != nil {
		sc.log.Error("reading a job's last fire; not catching up", "job", j.Name, "err", err)
		return
	}
	run, skipped := j.Missed(last, now)
	if len(skipped) > 0 {
		if err := sc.sub.RecordSkippedFires(ctx, j.Name, skipped, "missed while every instance was down, beyond the catch-up window"); err != nil {
			sc.log.Error("recording skipped fires", "job", j.Name, "err", err)
		}
		sc.log.Warn("skipped missed fires", "job", j.Name, "count", len(skipped), "newest", skipped[len(skipped)-1])
	}
	if !run.IsZero() {
		sc.log.Info("catching up on a missed fire", "job", j.Name, "fire_time", run)
		sc.fire(ctx, j, run)
	}
}

func (sc *Scheduler) fire(ctx context.Context, j *Compiled, t time.Time) {
	id, existing, err := sc.sub.FireJob(ctx, j, t)
	switch {
	case errors.Is(err, ErrFireConflict):
		sc.log.Warn("this fire was already started by an instance with a different job definition", "job", j.Name, "fire_time", t)
	case err != nil:
		if ctx.Err() == nil {
			sc.log.Error("job fire failed", "job", j.Name, "fire_time", t, "err", err)
		}
	case !existing:
		sc.log.Info("job fired", "job", j.Name, "fire_time", t, "broadcast_id", id)
	}
}
