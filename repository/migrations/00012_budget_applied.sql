-- applied_at: a rate budget member's heartbeat before its last one, once
-- the share that beat read had taken effect. A joiner's rise waits until
-- every other sender's applied_at is past the rise's start, so late
-- heartbeats slow a join down instead of overlapping the parts (quota).

-- +goose Up
ALTER TABLE budget_members
    ADD COLUMN IF NOT EXISTS applied_at DATETIME(6) NULL DEFAULT NULL;

-- +goose Down
ALTER TABLE budget_members
    DROP COLUMN IF EXISTS applied_at;
