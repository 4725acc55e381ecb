-- One FCM quota for the whole cluster (package quota), scheduling classes
-- and pacing.
--
-- budget_members: every instance's heartbeat, whether it is sending and
-- what rate it can use; the sending instances split PUSHFAN_RATE_LIMIT
-- between them (package quota). budget_pauses: the end of a 429's pause, by the
-- database's clock, for every instance to honour.
--
-- class: transactional (small, urgent sends) or bulk; chunks carry it as
-- class_rank (0 transactional, 1 bulk, 2 bulk with a pace) so that claims
-- take transactional chunks first and each class runs in slots of its own. Within a class they go by vseq, a chunk's place in a
-- virtual queue: a new broadcast's chunks start at the place the queue has
-- reached (the lowest pending vseq), so the broadcasts in a class take
-- turns chunk by chunk instead of the oldest taking every slot.
-- max_rate and deliver_over_ms pace a broadcast.

-- +goose Up
CREATE TABLE IF NOT EXISTS budget_members (
    project      VARCHAR(128) CHARACTER SET ascii NOT NULL,
    instance     VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    sending      TINYINT(1)   NOT NULL DEFAULT 0,
    -- demand: the rate it can use (its paced broadcasts' rates), NULL for
    -- as much as it gets.
    demand       DOUBLE       NULL DEFAULT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (project, instance)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE IF NOT EXISTS budget_pauses (
    project      VARCHAR(128) CHARACTER SET ascii NOT NULL,
    paused_until DATETIME(6)  NOT NULL,
    PRIMARY KEY (project)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS class           VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'bulk',
    ADD COLUMN IF NOT EXISTS max_rate        DOUBLE      NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS deliver_over_ms BIGINT      NULL DEFAULT NULL;
ALTER TABLE broadcast_chunks
    ADD COLUMN IF NOT EXISTS class_rank TINYINT UNSIGNED NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS vseq       BIGINT UNSIGNED  NOT NULL DEFAULT 0;
UPDATE broadcast_chunks SET vseq = seq WHERE status IN ('pending', 'leased');
DROP INDEX IF EXISTS idx_chunks_pending ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON broadcast_chunks (status, class_rank, vseq, broadcast_id);

-- +goose Down
DROP INDEX IF EXISTS idx_chunks_pending ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON broadcast_chunks (status, broadcast_id, seq);
ALTER TABLE broadcast_chunks DROP COLUMN IF EXISTS vseq, DROP COLUMN IF EXISTS class_rank;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS deliver_over_ms,
    DROP COLUMN IF EXISTS max_rate,
    DROP COLUMN IF EXISTS class;
DROP TABLE IF EXISTS budget_pauses;
DROP TABLE IF EXISTS budget_members;
