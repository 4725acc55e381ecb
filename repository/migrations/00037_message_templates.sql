-- Message templates (issue 46): a named title, body, data and link the
-- console's team saves once and reuses when composing. Their text may use
-- the message template syntax ({{.first_name}}), which a named audience's
-- columns fill per user when a broadcast is sent.
--
-- message_templates  one row per template, keyed by its name (what the
--                    console lists and the API's path names); data is a
--                    JSON object of strings (NULL: none). Who saved it and
--                    when: created_* and updated_* (display names).

-- +goose Up
CREATE TABLE IF NOT EXISTS message_templates (
    name        VARCHAR(64)  NOT NULL,
    title       TEXT         NOT NULL,
    body        TEXT         NOT NULL,
    data        TEXT         NULL DEFAULT NULL,
    link        VARCHAR(2048) NOT NULL DEFAULT '',
    created_at  DATETIME(6)  NOT NULL,
    created_by  VARCHAR(128) NOT NULL DEFAULT '',
    updated_at  DATETIME(6)  NOT NULL,
    updated_by  VARCHAR(128) NOT NULL DEFAULT '',
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS message_templates;
