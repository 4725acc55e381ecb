-- engagement: what the apps report after FCM accepted a send (received,
-- opened, clicked, dismissed), from signed event tokens (package
-- engagement). One row per broadcast, target and event type: a replay is
-- a duplicate, so every count is of distinct targets. The counts, the
-- per-minute series and the time-to-open histogram are added in the same
-- transaction as the rows they count, by the group commit that stores
-- them; reading them never scans the events.

-- +goose Up
CREATE TABLE IF NOT EXISTS engagement_events (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    target_id    BIGINT UNSIGNED NOT NULL,
    type         TINYINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    variant      TINYINT UNSIGNED NOT NULL,
    localized    SMALLINT UNSIGNED NOT NULL,
    sent_at      DATETIME(6) NOT NULL,
    at           DATETIME(6) NOT NULL,
    PRIMARY KEY (broadcast_id, target_id, type)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS engagement_counts (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    variant      TINYINT UNSIGNED NOT NULL,
    localized    SMALLINT UNSIGNED NOT NULL,
    type         TINYINT UNSIGNED NOT NULL,
    n            BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, variant, localized, type)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS engagement_series (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    type         TINYINT UNSIGNED NOT NULL,
    minute       DATETIME NOT NULL,
    n            BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, type, minute)
) ENGINE=InnoDB;

-- Seconds from send to open, in buckets of about 10 % width (see
-- engagement.DelayBucket): p50 and p90 within a bucket, at a row per
-- bucket rather than a row per open.
CREATE TABLE IF NOT EXISTS engagement_open_delays (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    bucket       SMALLINT UNSIGNED NOT NULL,
    n            BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, bucket)
) ENGINE=InnoDB;

-- The event keys pushfan generated itself (PUSHFAN_EVENT_KEYS unset), so
-- that every replica signs and verifies with the same one.
CREATE TABLE IF NOT EXISTS event_keys (
    kid        VARCHAR(16) NOT NULL PRIMARY KEY,
    secret     VARBINARY(64) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;

-- No IF NOT EXISTS: MySQL 8 has none for columns, and goose runs this once.
ALTER TABLE stats_archive
    ADD COLUMN opened BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN clicked BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE stats_archive
    DROP COLUMN opened,
    DROP COLUMN clicked;
DROP TABLE IF EXISTS event_keys;
DROP TABLE IF EXISTS engagement_open_delays;
DROP TABLE IF EXISTS engagement_series;
DROP TABLE IF EXISTS engagement_counts;
DROP TABLE IF EXISTS engagement_events;
