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

// ErrJobPaused: the job is paused (on every instance); the Submitter
// recorded the fire skipped, and the scheduler moves on to the next.
var ErrJobPaused = errors.New("job is paused")

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
	// retryFor and retryBase shape the retries of a fire that failed
	// (DefaultRetryFor, 1 s doubling up to 10 s; tests shorten them).
	retryFor, retryBase time.Duration

	loop lifecycle.Loop
}

// DefaultRetryFor is how long after its fire time a fire that failed
// (the database unreachable when every instance fired it) is retried,
// unless the job's catch-up window is longer; a fire still failing then is
// recorded skipped. Without retries, one failed statement on every
// instance at the fire's second lost the fire without a trace (the chaos
// soak found it: a database outage over 10:05:00 left no broadcast and no
// skipped fire for that minute).
const DefaultRetryFor = 5 * time.Minute

// NewScheduler returns a Scheduler for jobs; Start runs it.
func NewScheduler(jobs []*Compiled, sub Submitter, log *slog.Logger) *Scheduler {
	return &Scheduler{jobs: jobs, sub: sub, log: log, now: time.Now, retryFor: DefaultRetryFor, retryBase: time.Second}
}

// retry is a failed fire waiting for its next attempt.
type retry struct {
	fire, at time.Time
	n        int
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
	retries := map[*Compiled]*retry{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var next time.Time
		for _, t := range due {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		for _, r := range retries {
			if next.IsZero() || r.at.Before(next) {
				next = r.at
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
				if old := retries[j]; old != nil {
					// A newer fire supersedes one still failing, as after
					// an outage only the newest missed fire runs.
					sc.skip(ctx, j, old.fire, "superseded by the next fire while its attempts failed")
					delete(retries, j)
				}
				if !sc.fire(ctx, j, t) {
					retries[j] = &retry{fire: t, at: sc.now().Add(sc.retryBase), n: 1}
				}
				due[j] = j.Next(t)
			}
		}
		for j, r := range retries {
			if r.at.After(sc.now()) {
				continue
			}
			switch {
			case sc.fire(ctx, j, r.fire):
				delete(retries, j)
			case sc.now().Sub(r.fire) > max(j.Catchup, sc.retryFor):
				sc.skip(ctx, j, r.fire, "every attempt failed until the retry window passed")
				delete(retries, j)
			default:
				r.n++
				r.at = sc.now().Add(min(sc.retryBase<<min(r.n-1, 10), 10*sc.retryBase))
			}
		}
	}
}

// skip records a fire that will not run.
func (sc *Scheduler) skip(ctx context.Context, j *Compiled, t time.Time, reason string) {
	sc.log.Error("job fire given up", "job", j.Name, "fire_time", t, "reason", reason)
	if err := sc.sub.RecordSkippedFires(ctx, j.Name, []time.Time{t}, reason); err != nil {
		sc.log.Error("recording a skipped fire", "job", j.Name, "fire_time", t, "err", err)
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
		_ = sc.fire(ctx, j, run) // a failure here is logged; the catch-up is best effort, as before
	}
}

// fire starts the fire at t of j; false when it failed and is to be
// retried (the Submitter keys it on job and fire time, so a retry of a
// fire whose answer was lost finds it started).
func (sc *Scheduler) fire(ctx context.Context, j *Compiled, t time.Time) bool {
	id, existing, err := sc.sub.FireJob(ctx, j, t)
	switch {
	case errors.Is(err, ErrJobPaused):
		sc.log.Info("job is paused: fire skipped", "job", j.Name, "fire_time", t)
	case errors.Is(err, ErrFireConflict):
		sc.log.Warn("this fire was already started by an instance with a different job definition", "job", j.Name, "fire_time", t)
	case err != nil:
		if ctx.Err() != nil {
			return true // stopping: the next instance's catch-up decides
		}
		sc.log.Error("job fire failed; retrying", "job", j.Name, "fire_time", t, "err", err)
		return false
	case !existing:
		sc.log.Info("job fired", "job", j.Name, "fire_time", t, "broadcast_id", id)
	}
	return true
}
