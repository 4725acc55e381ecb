-- late_holders: a chunk a cancel closed while it was still leased, its
-- lease expired (the holder paused, or cut off from the database, past its
-- lease). The close counted the chunk's targets without a stored outcome
-- canceled, but the holder may have sent some of them since its last
-- checkpoint. The row keeps the holder's epoch and last checkpoint
-- sequence so that its next checkpoints (package lease, Checkpoint) still
-- store what it really sent, moving those targets out of canceled, once:
-- each is sequenced like a chunk's checkpoint, and the holder's final one
-- deletes the row. It outlives the chunk rows (Finish deletes them), and
-- goes with its broadcast at retention.
--
--   epoch     the holder's claim epoch (the close moved the chunk past it)
--   ckpt_seq  the last checkpoint stored by that holder
--   rest      how many of the chunk's targets the close counted canceled
--             that are not yet moved out by the holder's late checkpoints

-- +goose Up
CREATE TABLE IF NOT EXISTS late_holders (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    seq          INT UNSIGNED NOT NULL,
    epoch        BIGINT UNSIGNED NOT NULL,
    ckpt_seq     BIGINT UNSIGNED NOT NULL,
    rest         BIGINT UNSIGNED NOT NULL,
    closed_at    DATETIME(6) NOT NULL,
    PRIMARY KEY (broadcast_id, seq)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS late_holders;
