-- Frequency caps (package caps): a per-user ledger of sends, reserved
-- before a send and released at the checkpoint when the send did not
-- happen, so that two broadcasts racing over the same users never give
-- one more than the cap allows.
--
-- frequency_slots: a cap of N per window is N slots per user; a send
-- holds one slot of each cap until the slot expires (the end of the
-- user's local day for a daily cap, the send time plus the window for a
-- rolling one). A slot is reused once expired, so the table holds at most
-- N rows per user and cap; retention deletes those long expired.
-- frequency_users: each user's decision in one broadcast (reserved,
-- capped, sent, released), so that every device of a user, whatever page
-- or chunk reads it, gets the same answer. Deleted with the broadcast.
-- capped counts a broadcast's targets withheld by a cap: an outcome
-- beside succeeded, failed and canceled. frequency_cap records the caps a
-- broadcast was sent under ("" none: exempt, or bypassed by the request).

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS capped BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS frequency_cap VARCHAR(255) NULL;

ALTER TABLE stats_archive
    ADD COLUMN IF NOT EXISTS capped BIGINT UNSIGNED NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS frequency_slots (
    user_id      BIGINT UNSIGNED NOT NULL,
    cap          VARCHAR(32) CHARACTER SET ascii NOT NULL,
    slot         SMALLINT UNSIGNED NOT NULL,
    broadcast_id BIGINT UNSIGNED NOT NULL,
    expires_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (user_id, cap, slot),
    KEY idx_frequency_slots_broadcast (broadcast_id, user_id),
    KEY idx_frequency_slots_expires (expires_at)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS frequency_users (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    state        TINYINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, user_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS frequency_users;
DROP TABLE IF EXISTS frequency_slots;
ALTER TABLE stats_archive
    DROP COLUMN IF EXISTS capped;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS frequency_cap,
    DROP COLUMN IF EXISTS capped;
