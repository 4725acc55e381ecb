-- The chunk protocol made exact (package lease):
--
-- epoch        fencing token: +1 per claim, and per close by a cancel; every
--              checkpoint, release and hand-back is conditional on it.
-- ckpt_seq     the last checkpoint applied: retrying a checkpoint whose
--              commit answer was lost is recognised and adds nothing twice.
-- ckpt_invalidated  tokens that checkpoint invalidated (for the replay).
-- done_ranges  targets above cursor_id that already have an outcome, as
--              uvarint ranges relative to the cursor; a takeover skips them.
-- claim_token  the claim attempt holding the lease (found again after an
--              unknown commit outcome).
-- targets      planned target count (NULL until counted): what a cancel
--              counts as canceled for a chunk that never ran.
-- refused_at, refusal  since when no instance could run the chunk (a named
--              audience missing from its configuration) and why.
--
-- Two claim indexes, one per claim statement: pending chunks in broadcast
-- order, expired leases by expiry. Finished broadcasts' chunk rows are
-- deleted at finish (summarised in broadcasts.chunk_summary), so neither
-- scan ever wades through finished work.
--
-- submit_token and finish_token make a submit and a finish recognisable
-- after a lost commit answer. stats_archive keeps the totals of broadcasts
-- removed by retention, so /push/stats does not change when they go.

-- +goose Up
ALTER TABLE broadcast_chunks
    ADD COLUMN IF NOT EXISTS epoch            BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ckpt_seq         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ckpt_invalidated BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS done_ranges      MEDIUMBLOB      NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS claim_token      CHAR(32) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS targets          BIGINT          NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS refused_at       DATETIME(6)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS refusal          VARCHAR(255)    NULL DEFAULT NULL;
DROP INDEX IF EXISTS idx_chunks_claim ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON broadcast_chunks (status, broadcast_id, seq);
CREATE INDEX IF NOT EXISTS idx_chunks_lease ON broadcast_chunks (status, lease_until);
CREATE INDEX IF NOT EXISTS idx_chunks_claim_token ON broadcast_chunks (claim_token);

ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS submit_token  CHAR(32) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS finish_token  CHAR(32) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS chunk_summary LONGTEXT NULL DEFAULT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS uq_broadcasts_submit_token ON broadcasts (submit_token);
CREATE INDEX IF NOT EXISTS idx_broadcasts_finished ON broadcasts (finished_at);

-- One row (id = 1) of totals, and per-code counts, of deleted broadcasts.
CREATE TABLE IF NOT EXISTS stats_archive (
    id                 TINYINT UNSIGNED NOT NULL,
    broadcasts         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    dry_runs           BIGINT UNSIGNED NOT NULL DEFAULT 0,
    targeted           BIGINT UNSIGNED NOT NULL DEFAULT 0,
    succeeded          BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failed             BIGINT UNSIGNED NOT NULL DEFAULT 0,
    canceled           BIGINT UNSIGNED NOT NULL DEFAULT 0,
    invalidated_tokens BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE IF NOT EXISTS stats_archive_errors (
    code  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    count BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS stats_archive_errors;
DROP TABLE IF EXISTS stats_archive;
DROP INDEX IF EXISTS idx_broadcasts_finished ON broadcasts;
DROP INDEX IF EXISTS uq_broadcasts_submit_token ON broadcasts;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS chunk_summary,
    DROP COLUMN IF EXISTS finish_token,
    DROP COLUMN IF EXISTS submit_token;
DROP INDEX IF EXISTS idx_chunks_claim_token ON broadcast_chunks;
DROP INDEX IF EXISTS idx_chunks_lease ON broadcast_chunks;
DROP INDEX IF EXISTS idx_chunks_pending ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_claim ON broadcast_chunks (status, lease_until);
ALTER TABLE broadcast_chunks
    DROP COLUMN IF EXISTS refusal,
    DROP COLUMN IF EXISTS refused_at,
    DROP COLUMN IF EXISTS targets,
    DROP COLUMN IF EXISTS claim_token,
    DROP COLUMN IF EXISTS done_ranges,
    DROP COLUMN IF EXISTS ckpt_invalidated,
    DROP COLUMN IF EXISTS ckpt_seq,
    DROP COLUMN IF EXISTS epoch;
