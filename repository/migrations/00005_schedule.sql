-- Scheduling: one-off broadcasts at send_at, recurring cron jobs (one
-- broadcast per job and fire time, enforced by the idempotency key
-- "cron:<job>:<fire time>"), and fires skipped because every instance was
-- down for longer than the job's catch-up window.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS send_at      DATETIME(6) NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS trigger_kind VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'api',
    ADD COLUMN IF NOT EXISTS job_name     VARCHAR(64) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS fire_time    DATETIME(6) NULL DEFAULT NULL;
CREATE INDEX IF NOT EXISTS idx_broadcasts_schedule ON broadcasts (status, send_at);
CREATE INDEX IF NOT EXISTS idx_broadcasts_job ON broadcasts (job_name, fire_time);

CREATE TABLE IF NOT EXISTS cron_skipped_fires (
    job_name   VARCHAR(64) CHARACTER SET ascii NOT NULL,
    fire_time  DATETIME(6) NOT NULL,
    reason     VARCHAR(255) NOT NULL DEFAULT '',
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (job_name, fire_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS cron_skipped_fires;
DROP INDEX IF EXISTS idx_broadcasts_job ON broadcasts;
DROP INDEX IF EXISTS idx_broadcasts_schedule ON broadcasts;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS fire_time,
    DROP COLUMN IF EXISTS job_name,
    DROP COLUMN IF EXISTS trigger_kind,
    DROP COLUMN IF EXISTS send_at;
