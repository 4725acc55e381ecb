-- Releases side by side (issue 38, part 4; docs/operations.md, "Upgrades").
--
-- schema_fence   one row: the newest schema any release has begun to
--                migrate the database to. Every release raises it to the
--                schema it was built for before it applies its migrations
--                (repository.Migrate), and every transaction of package
--                lease that moves a chunk or a broadcast on reads it under a
--                shared lock first: a release built for an older schema
--                then makes no such transition (it stores what it sent and
--                hands its chunks back), so no instance ever moves state on
--                with bookkeeping it does not know. The raise waits for the
--                transitions in flight, so a migration never runs beside
--                one of them.
--   version      that schema's version (goose's: the highest migration
--                the release embeds)
--   raised_at    when it last rose
-- budget_members.schema_version
--                the schema the instance was built for, written with its
--                rate-budget heartbeat (0: a release from before this
--                migration): GET /push/cluster shows which instances are
--                older than the database.

-- +goose Up
CREATE TABLE IF NOT EXISTS schema_fence (
    id        TINYINT UNSIGNED NOT NULL PRIMARY KEY,
    version   BIGINT UNSIGNED  NOT NULL DEFAULT 0,
    raised_at DATETIME(6)      NULL DEFAULT NULL
) ENGINE=InnoDB;
INSERT IGNORE INTO schema_fence (id, version) VALUES (1, 0);

ALTER TABLE budget_members
    ADD COLUMN IF NOT EXISTS schema_version BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE budget_members DROP COLUMN IF EXISTS schema_version;
DROP TABLE IF EXISTS schema_fence;
