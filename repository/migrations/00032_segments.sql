-- Segments (issue 42; docs/segments.md).
--
-- device_tokens.app_version  the app's version on the device ("5.10.0"),
--                            set by the app's token registration; NULL
--                            when unknown. A segment's app_version filter
--                            compares it as a version.
-- segments                   the saved segments: a name, its current
--                            version, and deleted_at once deleted (the
--                            name is free again; the versions stay, for
--                            the broadcasts that were sent to them)
-- segment_versions           every version of every segment, never
--                            changed: its filter (JSON), description and
--                            who wrote it. A broadcast to a segment keeps
--                            the version and filter it was sent to.

-- +goose Up
ALTER TABLE device_tokens
    ADD COLUMN IF NOT EXISTS app_version VARCHAR(32) CHARACTER SET ascii NULL DEFAULT NULL;

CREATE TABLE IF NOT EXISTS segments (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name        VARCHAR(64) CHARACTER SET ascii NOT NULL,
    version     INT UNSIGNED NOT NULL DEFAULT 1,
    created_at  DATETIME(6) NOT NULL,
    updated_at  DATETIME(6) NOT NULL,
    deleted_at  DATETIME(6) NULL DEFAULT NULL,
    -- live_name is the name while the segment is not deleted: one live
    -- segment per name, any number of deleted ones.
    live_name   VARCHAR(64) CHARACTER SET ascii AS (IF(deleted_at IS NULL, name, NULL)) STORED,
    UNIQUE KEY uq_segments_live_name (live_name)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS segment_versions (
    segment_id  BIGINT UNSIGNED NOT NULL,
    version     INT UNSIGNED NOT NULL,
    description VARCHAR(512) NOT NULL DEFAULT '',
    filter      TEXT NOT NULL,
    created_at  DATETIME(6) NOT NULL,
    created_by  VARCHAR(128) NOT NULL DEFAULT '',
    PRIMARY KEY (segment_id, version)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS segment_versions;
DROP TABLE IF EXISTS segments;
ALTER TABLE device_tokens DROP COLUMN IF EXISTS app_version;
