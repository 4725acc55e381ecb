-- writeback_failures: dead tokens of a broadcast whose write-back to the
-- app's own table (a mapped schema's tokens.on_dead) kept failing, so that
-- their checkpoint was stored without it. Their failure rows are stored;
-- only the app's table was not told. Added by the checkpoint that skipped
-- them, in its transaction, so the figure is exact.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS writeback_failures BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS writeback_failures;
