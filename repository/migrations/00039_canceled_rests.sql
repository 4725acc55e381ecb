-- The targets a cancel counted without reading them (lease: a cancel's
-- close of an idle chunk, or a run's last checkpoint with CancelRest):
-- one row per chunk, never one per target, written in the transaction
-- that counted them. A broadcast's export and a user's deliveries list
-- these targets as canceled by reading the chunk's unread range of the
-- audience when they are asked (package outcomes, rest.go), so that a
-- cancel of a 10M broadcast writes a row per chunk, not 10M targets.
--
-- canceled_rests
--   broadcast_id, seq   the chunk
--   lo_id               the chunk's lower bound (a target list is encoded from it)
--   after_id            the chunk's stored cursor when it was closed: the
--                       never-read targets are above it (those above it
--                       that have an outcome, a done range's or a late
--                       holder's, are kept in target_outcomes)
--   hi_id               the chunk's upper bound
--   rest                how many targets the close counted canceled
--   target_ids          a local-time chunk's fixed target list (lease/codec),
--                       NULL for a range of the audience
--   created_at          when the chunk was closed

-- +goose Up
CREATE TABLE IF NOT EXISTS canceled_rests (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    seq          INT UNSIGNED NOT NULL,
    lo_id        BIGINT UNSIGNED NOT NULL,
    after_id     BIGINT UNSIGNED NOT NULL,
    hi_id        BIGINT UNSIGNED NOT NULL,
    rest         BIGINT UNSIGNED NOT NULL,
    target_ids   MEDIUMBLOB NULL,
    created_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (broadcast_id, seq)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS canceled_rests;
