-- The sends of a broadcast split by device platform and, per message
-- variant, succeeded and failed apart (the campaigns' breakdowns,
-- docs/analytics.md#campaigns). Like the other counters they are only
-- ever added to inside a chunk's checkpoint transaction (lease, package
-- lease/sends), fenced and idempotent by the checkpoint's sequence number:
-- the platform ones in the UPDATE of the broadcasts row that adds
-- succeeded and failed, the variant ones in the broadcast_variants upsert
-- that adds targets. No checkpoint runs a statement more for them.
--
-- broadcasts.<platform>_succeeded, <platform>_failed
--   the sends to tokens whose platform column (as the run's audience page
--   read it) was android, ios or web, and other for the rest (none, or
--   another spelling). Rows of broadcasts sent before this migration hold
--   0: their sum then differs from succeeded and failed, and the
--   campaigns read such a broadcast's platforms as not stored.
-- broadcast_variants.succeeded, failed
--   targets (succeeded + failed) apart; an older row has 0 in both and
--   targets > 0, and is read as not split.
--
-- IF NOT EXISTS / IF EXISTS, as the other migrations: a run cut between
-- the two statements can be run again.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS android_succeeded BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS android_failed    BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ios_succeeded     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ios_failed        BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS web_succeeded     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS web_failed        BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS other_succeeded   BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS other_failed      BIGINT UNSIGNED NOT NULL DEFAULT 0;

ALTER TABLE broadcast_variants
    ADD COLUMN IF NOT EXISTS succeeded BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS failed    BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE broadcast_variants
    DROP COLUMN IF EXISTS succeeded,
    DROP COLUMN IF EXISTS failed;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS android_succeeded,
    DROP COLUMN IF EXISTS android_failed,
    DROP COLUMN IF EXISTS ios_succeeded,
    DROP COLUMN IF EXISTS ios_failed,
    DROP COLUMN IF EXISTS web_succeeded,
    DROP COLUMN IF EXISTS web_failed,
    DROP COLUMN IF EXISTS other_succeeded,
    DROP COLUMN IF EXISTS other_failed;
