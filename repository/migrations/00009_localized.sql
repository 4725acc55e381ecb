-- Per-language variants of a broadcast's message ("localized"): how many
-- targets each variant was sent to (succeeded or failed), "default" for the
-- targets that got the top-level title and body.
--
-- Like broadcast_errors, the counts are only ever added to inside a chunk's
-- checkpoint transaction (lease.Store.Checkpoint), fenced and idempotent by
-- the checkpoint's sequence number, so they stay exact across chunks,
-- takeovers and lost COMMIT answers. variant is a validated language tag
-- (ASCII) or "default"; binary so that two spellings never merge silently.

-- +goose Up
CREATE TABLE IF NOT EXISTS broadcast_variants (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    variant      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    targets      BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (broadcast_id, variant)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS broadcast_variants;
