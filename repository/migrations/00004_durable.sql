-- Durable broadcasts (chunks and leases, idempotent submit).
--
-- A broadcast's audience is split into keyset ranges of device_tokens.id
-- (lo_id, hi_id]; any instance claims a pending chunk, or one whose lease
-- expired, with SELECT ... FOR UPDATE SKIP LOCKED, and checkpoints cursor_id
-- (every target at or below it has its outcome stored) together with the
-- counters it adds to the broadcast, in one transaction. A takeover resumes
-- at cursor_id, so totals never count a target twice.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS max_token_id     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS cancel_requested TINYINT(1)      NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS idempotency_key  VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS request_hash     CHAR(64) CHARACTER SET ascii NULL DEFAULT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS uq_broadcasts_idempotency ON broadcasts (idempotency_key);

CREATE TABLE IF NOT EXISTS broadcast_chunks (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    seq          INT UNSIGNED    NOT NULL,
    lo_id        BIGINT UNSIGNED NOT NULL,  -- exclusive
    hi_id        BIGINT UNSIGNED NOT NULL,  -- inclusive
    cursor_id    BIGINT UNSIGNED NOT NULL,  -- checkpoint
    status       VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'pending', -- pending | leased | done
    lease_owner  VARCHAR(64) CHARACTER SET ascii NULL DEFAULT NULL,
    lease_until  DATETIME(6)     NULL DEFAULT NULL,
    claims       INT UNSIGNED    NOT NULL DEFAULT 0,
    takeovers    INT UNSIGNED    NOT NULL DEFAULT 0,  -- claims of an expired lease
    committed    BIGINT UNSIGNED NOT NULL DEFAULT 0,  -- targets whose outcome is stored
    done_by      VARCHAR(64) CHARACTER SET ascii NULL DEFAULT NULL,
    PRIMARY KEY (broadcast_id, seq),
    KEY idx_chunks_claim (status, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS broadcast_chunks;
DROP INDEX IF EXISTS uq_broadcasts_idempotency ON broadcasts;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS request_hash,
    DROP COLUMN IF EXISTS idempotency_key,
    DROP COLUMN IF EXISTS cancel_requested,
    DROP COLUMN IF EXISTS max_token_id;
