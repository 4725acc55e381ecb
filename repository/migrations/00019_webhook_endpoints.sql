-- webhook_endpoints: endpoints marked disabled after an event of theirs
-- failed for a day (package webhook). A disabled endpoint's events wait,
-- undelivered and unexpired, until an operator enables it again.

-- +goose Up
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    name        VARCHAR(64) NOT NULL PRIMARY KEY,
    disabled_at DATETIME(6) NULL,
    reason      VARCHAR(255) NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS webhook_endpoints;
