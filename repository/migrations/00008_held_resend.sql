-- Held broadcasts and resends to failed targets.
--
-- A held broadcast (status 'held') has no chunks: it is planned when it is
-- released, so nothing can claim it before. hold_expires_at is fixed when it
-- is created (PUSHFAN_HOLD_EXPIRY then), so changing the setting never
-- expires a hold someone was promised; released_by / released_at record who
-- let it go (the four-eyes setting compares released_by with created_by).
--
-- parent_id is the broadcast a resend goes over. A resend's audience is the
-- parent's failure rows joined to the tokens: idx_broadcast_failures_token
-- serves that join as a range of token ids within one broadcast, so a
-- resend pages and chunks like the built-in audiences.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS parent_id       BIGINT UNSIGNED NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS released_by     VARCHAR(64)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS released_at     DATETIME(6)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS hold_expires_at DATETIME(6)     NULL DEFAULT NULL;
CREATE INDEX IF NOT EXISTS idx_broadcasts_hold ON broadcasts (status, hold_expires_at);
CREATE INDEX IF NOT EXISTS idx_broadcasts_parent ON broadcasts (parent_id);
CREATE INDEX IF NOT EXISTS idx_broadcast_failures_token ON broadcast_failures (broadcast_id, token_id);

-- +goose Down
DROP INDEX IF EXISTS idx_broadcast_failures_token ON broadcast_failures;
DROP INDEX IF EXISTS idx_broadcasts_parent ON broadcasts;
DROP INDEX IF EXISTS idx_broadcasts_hold ON broadcasts;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS hold_expires_at,
    DROP COLUMN IF EXISTS released_at,
    DROP COLUMN IF EXISTS released_by,
    DROP COLUMN IF EXISTS parent_id;
