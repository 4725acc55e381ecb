-- The audit trail (issue 43; docs/audit.md).
--
-- audit_entries          one row per change a caller made: who (actor
--                        kind, id, name), what (action, target), from
--                        where (ip, request_id), and a detail object.
--                        Written in the change's own transaction and
--                        never updated; only retention deletes, oldest
--                        first, by id. The id is the list's keyset
--                        cursor (newest first); each filter has an index
--                        ending in id, so a filtered page reads no
--                        more rows than it returns.
-- broadcasts.canceled_by who canceled it (the actor's name), like
--                        created_by and released_by.

-- +goose Up
CREATE TABLE IF NOT EXISTS audit_entries (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at          DATETIME(6) NOT NULL,
    actor_kind  VARCHAR(16) CHARACTER SET ascii NOT NULL,
    actor_id    VARCHAR(255) NOT NULL,
    actor_name  VARCHAR(255) NOT NULL DEFAULT '',
    action      VARCHAR(64) CHARACTER SET ascii NOT NULL,
    target      VARCHAR(255) NOT NULL DEFAULT '',
    ip          VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '',
    request_id  VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '',
    detail      TEXT NULL DEFAULT NULL,
    KEY idx_audit_actor_id (actor_id, id),
    KEY idx_audit_actor_name (actor_name, id),
    KEY idx_audit_action (action, id),
    KEY idx_audit_target (target, id),
    KEY idx_audit_at (at)
) ENGINE=InnoDB;

ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS canceled_by VARCHAR(128) NULL DEFAULT NULL;

-- +goose Down
ALTER TABLE broadcasts DROP COLUMN IF EXISTS canceled_by;
DROP TABLE IF EXISTS audit_entries;
