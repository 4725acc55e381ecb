-- target_outcomes_created (migration 00036) served a retention by
-- created_at that never came: PUSHFAN_OUTCOME_RETENTION deletes a
-- finished broadcast's outcomes by the broadcast (repository,
-- outcomes_purge.go: whole primary keys per statement). The index cost
-- every checkpoint a secondary-index write and each row its entry.

-- +goose Up
DROP INDEX IF EXISTS target_outcomes_created ON target_outcomes;

-- +goose Down
CREATE INDEX IF NOT EXISTS target_outcomes_created ON target_outcomes (created_at);
