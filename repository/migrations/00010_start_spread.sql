-- Start spread: a scheduled broadcast (send_at) or a cron fire starts at
-- starts_at, its requested time plus a small offset derived from the
-- broadcast (PUSHFAN_START_SPREAD), so that the sends of many broadcasts
-- due at :00 do not all hit FCM in the same second. send_at and fire_time
-- stay as requested; PromoteDue plans a broadcast when starts_at has come
-- (send_at for rows stored before this column existed).

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS starts_at DATETIME(6) NULL DEFAULT NULL;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS starts_at;
