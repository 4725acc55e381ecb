-- Several apps (Firebase projects) in one deployment (docs/apps.md). An
-- FCM token belongs to exactly one project, so every token, broadcast and
-- chunk names its app; everything that existed before belongs to the app
-- "default", which is what the environment-only configuration is called.
--
-- ADD COLUMN with a constant default is instant on InnoDB (no table
-- rebuild), so the migration costs nothing on a table of 10M tokens.
-- broadcast_chunks carries its broadcast's app so that an instance claims
-- the chunks of each app in slots of its own with an index range scan,
-- never reading past the pending chunks of another app. The stats archive
-- keeps one row of totals per app.

-- +goose Up
ALTER TABLE device_tokens ADD COLUMN IF NOT EXISTS app VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT 'default';
ALTER TABLE broadcasts ADD COLUMN IF NOT EXISTS app VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT 'default';
ALTER TABLE broadcast_chunks ADD COLUMN IF NOT EXISTS app VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT 'default';

CREATE INDEX IF NOT EXISTS idx_broadcasts_app ON broadcasts (app, id);

DROP INDEX IF EXISTS idx_chunks_pending ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON broadcast_chunks (status, app, class_rank, vseq, broadcast_id);
DROP INDEX IF EXISTS idx_chunks_lease ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_lease ON broadcast_chunks (status, app, lease_until);

-- A frequency cap counts per app: a cap's key in the ledger is
-- "<app>/<window>" for an app other than the default, up to 64 + 8 bytes.
ALTER TABLE frequency_slots MODIFY cap VARCHAR(80) CHARACTER SET ascii NOT NULL;

ALTER TABLE stats_archive ADD COLUMN IF NOT EXISTS app VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT 'default',
    DROP PRIMARY KEY, ADD PRIMARY KEY (app);
ALTER TABLE stats_archive_errors ADD COLUMN IF NOT EXISTS app VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT 'default',
    DROP PRIMARY KEY, ADD PRIMARY KEY (app, code);

-- +goose Down
DELETE FROM frequency_slots WHERE cap LIKE '%/%';
ALTER TABLE frequency_slots MODIFY cap VARCHAR(32) CHARACTER SET ascii NOT NULL;
ALTER TABLE stats_archive_errors DROP PRIMARY KEY, ADD PRIMARY KEY (code), DROP COLUMN IF EXISTS app;
ALTER TABLE stats_archive DROP PRIMARY KEY, ADD PRIMARY KEY (id), DROP COLUMN IF EXISTS app;
DROP INDEX IF EXISTS idx_chunks_lease ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_lease ON broadcast_chunks (status, lease_until);
DROP INDEX IF EXISTS idx_chunks_pending ON broadcast_chunks;
CREATE INDEX IF NOT EXISTS idx_chunks_pending ON broadcast_chunks (status, class_rank, vseq, broadcast_id);
DROP INDEX IF EXISTS idx_broadcasts_app ON broadcasts;
ALTER TABLE broadcast_chunks DROP COLUMN IF EXISTS app;
ALTER TABLE broadcasts DROP COLUMN IF EXISTS app;
ALTER TABLE device_tokens DROP COLUMN IF EXISTS app;
