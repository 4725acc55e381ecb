-- Users and their FCM device tokens: the bundled audience source.
--
-- Every column beyond the contract ones has a default, so an operator's import
-- that names only (id[, push_enabled]) or (user_id, token[, platform]) works.
-- IF NOT EXISTS: MySQL DDL commits implicitly, so a half-applied migration must
-- be safe to run again.

-- +goose Up
CREATE TABLE IF NOT EXISTS users (
    id           BIGINT UNSIGNED NOT NULL,
    push_enabled TINYINT(1)      NOT NULL DEFAULT 1,
    locale       VARCHAR(16)     NOT NULL DEFAULT 'en',
    created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- token: ascii_bin because FCM tokens are case-sensitive; the default
-- ascii_general_ci would make the UNIQUE key merge tokens differing in case.
-- user_id has no foreign key so imports can load tokens before users; the
-- audience query joins users, so orphan tokens are simply never targeted.
-- The (user_id, invalidated_at) key covers the audience filter on tokens:
-- "user_id IN (...) AND invalidated_at IS NULL AND id > ?" (InnoDB appends the
-- primary key) for user_ids audiences, and an index-only join for counts.
CREATE TABLE IF NOT EXISTS device_tokens (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id        BIGINT UNSIGNED NOT NULL,
    token          VARCHAR(512) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    platform       VARCHAR(16)     NULL DEFAULT NULL,
    invalidated_at DATETIME(6)     NULL DEFAULT NULL,
    invalid_reason VARCHAR(64)     NULL DEFAULT NULL,
    created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    UNIQUE KEY uq_device_tokens_token (token),
    KEY idx_device_tokens_user_valid (user_id, invalidated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS device_tokens;
DROP TABLE IF EXISTS users;
