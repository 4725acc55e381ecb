-- Frequency caps for resends (package caps, issue 38). A resend's answers
-- and holds are keyed by the resend itself, as any broadcast's are, so
-- retention keeps them while it runs (before, they were its root's, and
-- went an hour after the root ended) and two resends of one original
-- count their chunks apart (before, their chunk 0s shared one hold row).
-- The slots a resend takes are still its root's: a user the original
-- was sent to holds one slot for the original and all its resends.
--
-- frequency_slots.taker   the broadcast whose reservation took the slot
--                         (the owner, broadcast_id, is a resend's root):
--                         a resend gives back only the slots it took,
--                         never the one its original sent under. 0: a
--                         slot taken by a release before this one, or by
--                         a broadcast that is no resend.
-- frequency_shares        the users each running resend reserved (or
--                         sent) under its root's slots. A resend that
--                         gives back a slot another resend of the root
--                         still shares hands it over (taker) instead of
--                         deleting it; the releasing checkpoint locks the
--                         root's rows of the user, so a resend sharing
--                         it meanwhile either is seen or reads the slot
--                         gone and takes one again. Deleted with the
--                         resend, by retention.
--
-- Expand only: ADD COLUMN with a constant default is instant on InnoDB,
-- and a release before this one never reads either. While one still runs
-- a resend beside this one, the two do not see each other's answers of
-- that resend (that release keys them by the root): it may give back a
-- root's slot this one shares, as it did between two resends of its own;
-- the send that follows takes it again at its checkpoint, and one that
-- finds it taken is counted in pushfan_frequency_cap_exceeded_total.

-- +goose Up
ALTER TABLE frequency_slots ADD COLUMN IF NOT EXISTS taker BIGINT UNSIGNED NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS frequency_shares (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    root         BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, user_id),
    KEY idx_frequency_shares_root (root, user_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS frequency_shares;
ALTER TABLE frequency_slots DROP COLUMN IF EXISTS taker;
