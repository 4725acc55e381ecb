-- Planning at production scale (issue 21): a broadcast's audience is
-- planned after the submit has answered, in steps, by any instance, and
-- every chunk knows its target count from the plan.
--
-- broadcasts:
--   planning       1 while the plan is incomplete: status 'planning' until a
--                  chunk is claimed (sending starts while the rest is planned).
--   plan_owner, plan_until, plan_epoch
--                  the plan's lease, fenced like a chunk's: every claim of the
--                  plan adds one to plan_epoch, and every step names it.
--   plan_cursor    the audience is planned up to this cursor (token id, or a
--                  named audience's cursor); a step commits only from the
--                  cursor it read, so a replayed step is recognised.
--   plan_seq       the next chunk seq.
--   plan_width     targets per chunk of this plan (PUSHFAN_CHUNK_WIDTH, wider
--                  when PUSHFAN_MAX_CHUNKS needs it), fixed at the first step.
--   plan_failures  failed planning attempts; past a bound the broadcast fails.
--   plan_refused_at since when no instance could plan it (a named audience
--                  missing from its configuration).
--   planned_at     when the plan completed: targeted is exact from then on.
--   open_chunks    chunk rows not done: the last chunk to end sees 0 without
--                  reading any other chunk row (finishing is O(1) per chunk end).
--   waiting        targets of chunks waiting for a later instant (local time,
--                  quiet hours), kept with the row so that reads and lists need
--                  no subquery.
--
-- broadcast_chunks:
--   status 'planning' (being filled by the plan, never claimed) and 'waiting'
--          (not due before not_before; a timer makes it 'pending' then), so
--          that the claim reads neither; 'canceled' is gone: a cancel closes
--          chunks and counts their targets in one transaction.
--   target_ids  the chunk's targets when the plan fixed them (local time and
--          quiet hours: each target in the chunk of its due instant, so a user
--          who changes zone afterwards is sent once), as uvarint deltas from
--          lo_id; NULL reads the audience's range (lo_id, hi_id].
--
-- Rows from before this migration: not-yet-due pending chunks become
-- waiting; chunks a cancel closed but nobody counted are counted by what
-- they planned (targets - committed; an uncounted chunk adds nothing) and
-- done; every open broadcast gets its open_chunks and waiting figures.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS planning        TINYINT(1)      NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_owner      VARCHAR(64) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS plan_until      DATETIME(6)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS plan_epoch      BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_cursor     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_seq        INT UNSIGNED    NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_width      BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_failures   INT UNSIGNED    NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS plan_refused_at DATETIME(6)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS planned_at      DATETIME(6)     NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS open_chunks     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS waiting         BIGINT UNSIGNED NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS idx_broadcasts_planning ON broadcasts (planning, plan_until);

ALTER TABLE broadcast_chunks
    ADD COLUMN IF NOT EXISTS target_ids MEDIUMBLOB NULL DEFAULT NULL;
CREATE INDEX IF NOT EXISTS idx_chunks_waiting ON broadcast_chunks (status, not_before);
CREATE INDEX IF NOT EXISTS idx_chunks_broadcast_status ON broadcast_chunks (broadcast_id, status);

UPDATE broadcast_chunks SET status = 'waiting'
    WHERE status = 'pending' AND not_before IS NOT NULL AND not_before > UTC_TIMESTAMP(6);

UPDATE broadcasts b JOIN (
        SELECT broadcast_id, SUM(GREATEST(COALESCE(targets, 0) - CAST(committed AS SIGNED), 0)) AS rest
        FROM broadcast_chunks WHERE status = 'canceled' GROUP BY broadcast_id
    ) c ON c.broadcast_id = b.id
    SET b.canceled = b.canceled + c.rest;
UPDATE broadcast_chunks SET status = 'done', done_by = 'canceled', cursor_id = hi_id, done_ranges = NULL,
        committed = GREATEST(CAST(COALESCE(targets, 0) AS SIGNED), CAST(committed AS SIGNED))
    WHERE status = 'canceled';

UPDATE broadcasts b JOIN (
        SELECT broadcast_id, SUM(status <> 'done') AS open_chunks,
            COALESCE(SUM(IF(status = 'waiting', COALESCE(targets, 0), 0)), 0) AS waiting
        FROM broadcast_chunks GROUP BY broadcast_id
    ) c ON c.broadcast_id = b.id
    SET b.open_chunks = c.open_chunks, b.waiting = c.waiting;
UPDATE broadcasts SET planned_at = COALESCE(started_at, created_at)
    WHERE planned_at IS NULL AND status IN ('queued', 'running', 'completed', 'canceled', 'failed');

-- +goose Down
UPDATE broadcast_chunks SET status = 'pending' WHERE status IN ('waiting', 'planning');
DROP INDEX IF EXISTS idx_chunks_broadcast_status ON broadcast_chunks;
DROP INDEX IF EXISTS idx_chunks_waiting ON broadcast_chunks;
ALTER TABLE broadcast_chunks DROP COLUMN IF EXISTS target_ids;
DROP INDEX IF EXISTS idx_broadcasts_planning ON broadcasts;
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS waiting,
    DROP COLUMN IF EXISTS open_chunks,
    DROP COLUMN IF EXISTS planned_at,
    DROP COLUMN IF EXISTS plan_refused_at,
    DROP COLUMN IF EXISTS plan_failures,
    DROP COLUMN IF EXISTS plan_width,
    DROP COLUMN IF EXISTS plan_seq,
    DROP COLUMN IF EXISTS plan_cursor,
    DROP COLUMN IF EXISTS plan_epoch,
    DROP COLUMN IF EXISTS plan_until,
    DROP COLUMN IF EXISTS plan_owner,
    DROP COLUMN IF EXISTS planning;
