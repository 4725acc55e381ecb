-- console_sessions: admin console sign-ins. The cookie carries a random
-- session id; only its SHA-256 is stored, so a read of this table cannot
-- sign anyone in. token_hash is the SHA-256 of the admin token that opened
-- it (what PUSHFAN_ADMIN_TOKENS holds for a hashed token): its name and role
-- are read from the configuration at every request, so a token removed or
-- rotated ends its sessions, whatever the other tokens are named. Every
-- instance reads the same rows: a session works behind any replica, and a
-- sign-out ends it on all of them.

-- +goose Up
CREATE TABLE IF NOT EXISTS console_sessions (
    id_hash     BINARY(32)   NOT NULL,
    token_hash  BINARY(32)   NOT NULL,
    csrf_token  CHAR(43)     CHARACTER SET ascii NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id_hash),
    KEY idx_console_sessions_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS console_sessions;
