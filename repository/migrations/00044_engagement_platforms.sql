-- engagement_platform_counts: a broadcast's events per device platform
-- and type (the campaigns' opens and clicks by platform), added by the
-- events' group commit in the same statement batch as engagement_counts,
-- from the platform the event token carries. platform is 1 + the index
-- in model.Platforms (android, ios, web, other); 0 is an event whose
-- token carried none (signed before pushfan put it there): counted, its
-- platform never guessed. A few rows per broadcast (at most 5 platforms x
-- 4 types), deleted with it by retention.

-- +goose Up
CREATE TABLE IF NOT EXISTS engagement_platform_counts (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    platform     TINYINT UNSIGNED NOT NULL,
    type         TINYINT UNSIGNED NOT NULL,
    n            BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, platform, type)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS engagement_platform_counts;
