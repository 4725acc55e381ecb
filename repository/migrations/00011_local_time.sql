-- Local-time delivery and quiet hours (issue 15, parts 3 and 4).
--
-- users.timezone       the user's IANA zone (NULL: PUSHFAN_DEFAULT_TIMEZONE).
-- broadcast_chunks.not_before  the chunk is not claimed before this instant
--              (its zone group's local send time, or its quiet window's end).
-- broadcast_chunks.zones  the zone group the chunk reads, as JSON
--              {"names":[...],"null":bool}; NULL reads every zone.
-- broadcasts.deferred  targets whose send was moved to a quiet window's end.
-- broadcasts.zone_fallbacks  targets whose zone name was unknown and who got
--              the default zone instead.

-- +goose Up
ALTER TABLE users
    ADD COLUMN IF NOT EXISTS timezone VARCHAR(64) NULL DEFAULT NULL;
ALTER TABLE broadcast_chunks
    ADD COLUMN IF NOT EXISTS not_before DATETIME(6) NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS zones      TEXT        NULL DEFAULT NULL;
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS deferred       BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS zone_fallbacks BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS zone_fallbacks,
    DROP COLUMN IF EXISTS deferred;
ALTER TABLE broadcast_chunks
    DROP COLUMN IF EXISTS zones,
    DROP COLUMN IF EXISTS not_before;
ALTER TABLE users
    DROP COLUMN IF EXISTS timezone;
