-- Every target's outcome, kept compactly (package lease, outcomes.go): one
-- row per stored checkpoint, never one per target. What support reads to
-- answer "did this user get that push?" (GET /push/users/{id}/deliveries)
-- and what a broadcast's export streams.
--
-- target_outcomes
--   broadcast_id, seq      the chunk
--   epoch, ckpt_seq        the holder's claim epoch and checkpoint sequence:
--                          a replayed checkpoint inserts nothing twice
--                          (INSERT IGNORE, as fenced_sends)
--   part                   a checkpoint whose targets span more than
--                          lease.MaxSpan cursors is kept as several rows
--   lo, hi                 the lowest and highest cursor the row lists (the
--                          token id for the built-in audiences and segments);
--                          hi - lo <= lease.MaxSpan
--   n                      how many targets it lists
--   outcomes               per target in cursor order: uvarint(gap << 3 |
--                          kind - 1), the gap from the previous cursor (lo
--                          for the first); a failure adds its code's length
--                          and bytes. Kinds: 1 accepted, 2 failed, 3 capped,
--                          4 canceled, 5 deferred, 6 stale, 7 excluded
--   created_at             when the checkpoint was stored (retention deletes
--                          by the broadcast's finished_at, and migration
--                          00040 drops the index on this column)
--
-- (broadcast_id, hi, lo) finds the rows that may hold cursor x: hi in
-- [x, x + MaxSpan] and lo <= x, a bounded index range whatever the
-- broadcast's size.

-- +goose Up
CREATE TABLE IF NOT EXISTS target_outcomes (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    seq          INT UNSIGNED NOT NULL,
    epoch        BIGINT UNSIGNED NOT NULL,
    ckpt_seq     BIGINT UNSIGNED NOT NULL,
    part         INT UNSIGNED NOT NULL,
    lo           BIGINT UNSIGNED NOT NULL,
    hi           BIGINT UNSIGNED NOT NULL,
    n            INT UNSIGNED NOT NULL,
    outcomes     MEDIUMBLOB NOT NULL,
    created_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (broadcast_id, seq, epoch, ckpt_seq, part),
    KEY target_outcomes_hi (broadcast_id, hi, lo),
    KEY target_outcomes_created (created_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS target_outcomes;
