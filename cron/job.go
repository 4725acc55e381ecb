package cron

import "pushfan/config"

// A job is configured in the YAML config (config.Job, which documents its
// keys) and compiled here into a schedule (Compile). The names are kept
// for the scheduler's callers.
type (
	Job           = config.Job
	JobMessage    = config.JobMessage
	JobLocalized  = config.JobLocalized
	JobQuietHours = config.JobQuietHours
)
