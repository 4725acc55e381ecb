-- The paused cron jobs (POST /push/cron/{job}/pause and /resume): a row
-- while the job is paused. Every instance's scheduler reads it before a
-- fire, so a pause holds on every replica and across restarts; a fire a
-- pause held back is recorded skipped (cron_skipped_fires, reason paused).
--
-- job_pauses
--   job_name     the job's configured name
--   paused_at    when it was paused
--   paused_by    who paused it (the caller's name)

-- +goose Up
CREATE TABLE IF NOT EXISTS job_pauses (
    job_name  VARCHAR(64) NOT NULL PRIMARY KEY,
    paused_at DATETIME(6) NOT NULL,
    paused_by VARCHAR(255) NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS job_pauses;
