package broadcast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pushfan/cron"
	"pushfan/model"
)

// CheckJobs validates every job's message and audience as a request would
// be (rules.Rules.CheckJobs), so a bad job stops start-up instead of
// failing at its first fire.
func (s *Service) CheckJobs(jobs []*cron.Compiled) error { return s.opt.Rules.CheckJobs(jobs) }

// ErrJobPaused: the job is paused (an admin paused it, on every
// instance: table job_pauses); its fires are skipped until it is resumed.
var ErrJobPaused = cron.ErrJobPaused

// FireJob submits the fire at of job j (the internal trigger, the
// scheduler), unless the job is paused (ErrJobPaused). existing reports a
// fire that had been started already. A pause that commits while a fire
// is past this check lets that one fire go: the pause holds from the
// next.
func (s *Service) FireJob(ctx context.Context, j *cron.Compiled, at time.Time) (*model.Broadcast, bool, error) {
	var paused bool
	err := s.in.RetryDB(ctx, "reading a job's pause", func(c context.Context) (err error) {
		paused, err = s.store.JobPaused(c, j.Name)
		return err
	})
	switch {
	case err != nil:
		return nil, false, unavailable(err)
	case paused:
		return nil, false, fmt.Errorf("job %s: %w", j.Name, ErrJobPaused)
	}
	return s.fireJob(ctx, j, at)
}

// RunJob fires job j now, once, paused or not: an admin's "run now". Its
// fire time is the current minute, the key of its broadcast as of a
// scheduled fire's (JobRequest), so a second click in the same minute (or
// the schedule's own fire of that minute) answers the same broadcast
// (existing) rather than sending twice.
func (s *Service) RunJob(ctx context.Context, j *cron.Compiled) (*model.Broadcast, bool, error) {
	return s.fireJob(ctx, j, s.now().UTC().Truncate(time.Minute))
}

// PauseJob pauses (paused) or resumes job on every instance, by names
// who; the request's audit entry commits with it. changed is false when
// it was so already.
func (s *Service) PauseJob(ctx context.Context, job string, paused bool, by string) (changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	changed, err = s.store.SetJobPaused(ctx, job, paused, by)
	if err == nil && changed {
		s.log.InfoContext(ctx, "job pause changed", "job", job, "paused", paused, "by", by)
	}
	return changed, err
}

// JobPauses are the paused jobs by name.
func (s *Service) JobPauses(ctx context.Context) (map[string]model.JobPause, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.JobPauses(ctx)
}

func (s *Service) fireJob(ctx context.Context, j *cron.Compiled, at time.Time) (*model.Broadcast, bool, error) {
	in, err := s.opt.Rules.JobRequest(j, at)
	if err != nil {
		return nil, false, err
	}
	return s.Submit(ctx, in)
}

// Jobs returns the service as the scheduler's Submitter.
func (s *Service) Jobs() cron.Submitter { return jobSubmitter{s} }

// jobSubmitter adapts the Service to cron.Submitter.
type jobSubmitter struct{ s *Service }

func (j jobSubmitter) FireJob(ctx context.Context, job *cron.Compiled, at time.Time) (uint64, bool, error) {
	b, existing, err := j.s.FireJob(ctx, job, at)
	if errors.Is(err, ErrJobPaused) {
		if rerr := j.s.recordSkippedFires(ctx, job.Name, []time.Time{at}, "paused"); rerr != nil {
			return 0, false, rerr // retried: the skip is recorded once it can be
		}
		return 0, false, err
	}
	if errors.Is(err, ErrIdempotencyConflict) {
		return 0, false, fmt.Errorf("%w: %w", cron.ErrFireConflict, err)
	}
	if err != nil {
		return 0, false, err
	}
	return b.ID, existing, nil
}

func (j jobSubmitter) LastFireTime(ctx context.Context, job string) (time.Time, error) {
	lf, err := j.s.reads.LastJobFire(ctx, job)
	return lf.FireTime, err
}

func (j jobSubmitter) RecordSkippedFires(ctx context.Context, job string, fires []time.Time, reason string) error {
	return j.s.recordSkippedFires(ctx, job, fires, reason)
}

// recordSkippedFires notes fires that will not run.
func (s *Service) recordSkippedFires(ctx context.Context, job string, fires []time.Time, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.RecordSkippedFires(ctx, job, fires, reason)
}
