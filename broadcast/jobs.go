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

// FireJob submits the fire at of job j (the internal trigger, the
// scheduler). existing reports a fire that had been started already.
func (s *Service) FireJob(ctx context.Context, j *cron.Compiled, at time.Time) (*model.Broadcast, bool, error) {
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
