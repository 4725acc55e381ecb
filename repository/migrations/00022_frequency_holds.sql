-- Frequency caps: which chunk runs of a broadcast hold a user's
-- reservation with a target read and not yet settled (package caps).
--
-- A user's answer is shared by every chunk of the broadcast, so a
-- checkpoint that stores only unsent outcomes for a user may give the
-- slot back only when no other target of theirs, in any chunk, was
-- handed to the workers under that answer and is still without a stored
-- outcome: else a racing broadcast takes the freed slot, the in-flight
-- target is sent, and the user ends past the cap. targets counts them
-- per chunk; a checkpoint subtracts its outcomes, and releases a user
-- only when the broadcast's sum is 0. epoch is the chunk's claim: a
-- takeover counts afresh (the targets the dead run left unsettled are
-- read again by the takeover), and upto the last cursor counted, so a
-- page reserved again (a retry) counts once.

-- +goose Up
CREATE TABLE IF NOT EXISTS frequency_holds (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    chunk        INT UNSIGNED NOT NULL,
    epoch        BIGINT UNSIGNED NOT NULL,
    upto         BIGINT UNSIGNED NOT NULL,
    targets      INT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, user_id, chunk)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS frequency_holds;
