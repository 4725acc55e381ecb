-- What a holder fenced off by a takeover sent, counted exactly when a
-- cancel ends the chunk before its new holder sent those targets again
-- (package lease, fenced.go). Without it such targets were delivered but
-- counted canceled.
--
-- broadcast_chunks.fenced_epoch  the epoch of the last holder a takeover
--                                fenced off (NULL: never taken over)
-- fenced_sends                   a fenced holder's sent outcomes, target by
--                                target, stored while the chunk is open;
--                                read and dropped by the chunk's close (or
--                                by Finish when it completed)
--   epoch, ckpt_seq              the holder's claim epoch and checkpoint
--                                sequence: a retry stores nothing twice
--   outcomes                     per target: the uvarint gap from the
--                                previous cursor, then the error code's
--                                length and bytes (0: succeeded)
-- late_holders.unsent            for a chunk its successor closed with a
--                                cancel: the targets the close counted
--                                canceled that no fenced holder has reported
--                                yet (ranges of cursors); every holder with
--                                an epoch up to the row's may still report.
--                                NULL for a chunk a cancel closed under a
--                                stalled holder (the row's epoch is that
--                                holder's).

-- +goose Up
CREATE TABLE IF NOT EXISTS fenced_sends (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    seq          INT UNSIGNED NOT NULL,
    epoch        BIGINT UNSIGNED NOT NULL,
    ckpt_seq     BIGINT UNSIGNED NOT NULL,
    outcomes     MEDIUMBLOB NOT NULL,
    PRIMARY KEY (broadcast_id, seq, epoch, ckpt_seq)
) ENGINE=InnoDB;

-- No IF NOT EXISTS: MySQL 8 has none for columns, and goose runs this once.
ALTER TABLE broadcast_chunks ADD COLUMN fenced_epoch BIGINT UNSIGNED NULL;
ALTER TABLE late_holders ADD COLUMN unsent MEDIUMBLOB NULL;

-- +goose Down
DROP TABLE IF EXISTS fenced_sends;
ALTER TABLE late_holders DROP COLUMN unsent;
ALTER TABLE broadcast_chunks DROP COLUMN fenced_epoch;
