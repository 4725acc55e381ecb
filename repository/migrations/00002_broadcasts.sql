-- Broadcasts and their per-error-code counters.
--
-- Counters live on the broadcast row and are only ever incremented inside one
-- transaction together with broadcast_errors (a chunk's checkpoint, package
-- lease: Store.Checkpoint), so a reader
-- sees failed == sum(broadcast_errors.count) at any instant.
-- message and audience are JSON kept in LONGTEXT (MariaDB's JSON is an alias
-- of that anyway); the CHECK keeps garbage out on both MariaDB and MySQL 8.

-- +goose Up
CREATE TABLE IF NOT EXISTS broadcasts (
    id                    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    status                VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'queued',
    dry_run               TINYINT(1)      NOT NULL DEFAULT 0,
    invalidate_on_dry_run TINYINT(1)      NOT NULL DEFAULT 0,
    message               LONGTEXT        NOT NULL,
    audience              LONGTEXT        NOT NULL,
    request_id            VARCHAR(64)     NOT NULL DEFAULT '',
    created_by            VARCHAR(64)     NULL DEFAULT NULL,
    targeted              BIGINT UNSIGNED NOT NULL DEFAULT 0,
    succeeded             BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failed                BIGINT UNSIGNED NOT NULL DEFAULT 0,
    canceled              BIGINT UNSIGNED NOT NULL DEFAULT 0,
    invalidated_tokens    BIGINT UNSIGNED NOT NULL DEFAULT 0,
    error                 TEXT            NULL DEFAULT NULL,
    created_at            DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    started_at            DATETIME(6)     NULL DEFAULT NULL,
    finished_at           DATETIME(6)     NULL DEFAULT NULL,
    PRIMARY KEY (id),
    KEY idx_broadcasts_status_id (status, id),
    CONSTRAINT chk_broadcasts_message_json CHECK (JSON_VALID(message)),
    CONSTRAINT chk_broadcasts_audience_json CHECK (JSON_VALID(audience))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- code is utf8mb4_bin: error codes are identifiers, "UNREGISTERED" and
-- "unregistered" must stay two keys.
CREATE TABLE IF NOT EXISTS broadcast_errors (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    count        BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (broadcast_id, code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS broadcast_errors;
DROP TABLE IF EXISTS broadcasts;
