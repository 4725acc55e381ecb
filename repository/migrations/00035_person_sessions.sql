-- Console sessions for people signed in through the OIDC provider, beside
-- the admin tokens' sessions. A token's session keeps naming its token
-- (token_hash, so removing the token ends it); a person's has no token:
-- token_hash is NULL and the row carries the person (the provider's
-- subject and their email or name) and the role their groups mapped to at
-- sign-in. apps stays NULL for a person (every app) and is here so a
-- session's principal is read from one row whatever its kind.
--
-- oidc_states: a sign-in between GET /console/oidc/login and the
-- provider's callback (state, nonce, PKCE verifier), in the database so a
-- callback that reaches another replica than the start still finishes,
-- and deleted when taken, so a replayed state is refused on every
-- replica. Only hashes of the state and of the browser's cookie are kept.

-- +goose Up
ALTER TABLE console_sessions
    MODIFY token_hash BINARY(32) NULL,
    ADD COLUMN actor_kind VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT 'token',
    ADD COLUMN actor_id   VARCHAR(255) NULL,
    ADD COLUMN actor_name VARCHAR(255) NULL,
    ADD COLUMN role       VARCHAR(16)  CHARACTER SET ascii NULL,
    ADD COLUMN apps       TEXT NULL;

CREATE TABLE IF NOT EXISTS oidc_states (
    state_hash    BINARY(32)   NOT NULL,
    browser_hash  BINARY(32)   NOT NULL,
    nonce         VARCHAR(64)  CHARACTER SET ascii NOT NULL,
    verifier      VARCHAR(128) CHARACTER SET ascii NOT NULL,
    expires_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (state_hash),
    KEY idx_oidc_states_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS oidc_states;
DELETE FROM console_sessions WHERE token_hash IS NULL;
ALTER TABLE console_sessions
    DROP COLUMN apps,
    DROP COLUMN role,
    DROP COLUMN actor_name,
    DROP COLUMN actor_id,
    DROP COLUMN actor_kind,
    MODIFY token_hash BINARY(32) NOT NULL;
