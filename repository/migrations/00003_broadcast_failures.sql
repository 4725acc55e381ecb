-- One row per token that finally failed in a broadcast, for the operator to
-- page through (by id, optionally per error code).

-- +goose Up
CREATE TABLE IF NOT EXISTS broadcast_failures (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    broadcast_id BIGINT UNSIGNED NOT NULL,
    token_id     BIGINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    message      VARCHAR(1024)   NOT NULL DEFAULT '',
    attempts     INT UNSIGNED    NOT NULL DEFAULT 0,
    created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    KEY idx_broadcast_failures_broadcast_id (broadcast_id, id),
    KEY idx_broadcast_failures_broadcast_code_id (broadcast_id, code, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS broadcast_failures;
