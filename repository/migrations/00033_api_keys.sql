-- API keys kept in the database, and the actors of the four-eyes rule
-- (issue 43; docs/security.md#api-keys).
--
-- api_keys         one row per key: its public id (the actor id the
--                  broadcasts and the audit trail name), its name, role
--                  and apps (a JSON array; NULL: every app), and only the
--                  SHA-256 of its secret, so a read of this table cannot
--                  call the API. A revoked key keeps its row (revoked_at):
--                  its id stays the name of what it did. last_used_at is
--                  written at most once a minute per key per instance.
-- broadcasts       created_by_kind/created_by_id and
--                  released_by_kind/released_by_id: the actor (person,
--                  key or token) that created and released a broadcast,
--                  which the four-eyes rule compares; created_by and
--                  released_by stay their display names. NULL on rows
--                  written before this migration and on cron fires.

-- +goose Up
CREATE TABLE IF NOT EXISTS api_keys (
    id              VARCHAR(32)  CHARACTER SET ascii NOT NULL,
    name            VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    role            VARCHAR(16)  CHARACTER SET ascii NOT NULL,
    apps            TEXT         NULL DEFAULT NULL,
    secret_hash     BINARY(32)   NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    created_by_kind VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT '',
    created_by_id   VARCHAR(255) NOT NULL DEFAULT '',
    created_by      VARCHAR(128) NOT NULL DEFAULT '',
    expires_at      DATETIME(6)  NULL DEFAULT NULL,
    revoked_at      DATETIME(6)  NULL DEFAULT NULL,
    last_used_at    DATETIME(6)  NULL DEFAULT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_api_keys_secret_hash (secret_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS created_by_kind  VARCHAR(16)  CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS created_by_id    VARCHAR(255) NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS released_by_kind VARCHAR(16)  CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS released_by_id   VARCHAR(255) NULL DEFAULT NULL;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS released_by_id,
    DROP COLUMN IF EXISTS released_by_kind,
    DROP COLUMN IF EXISTS created_by_id,
    DROP COLUMN IF EXISTS created_by_kind;
DROP TABLE IF EXISTS api_keys;
