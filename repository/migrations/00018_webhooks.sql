-- webhook_outbox: the events pushfan tells the apps about (package
-- webhook), one row per event and endpoint, written in the same
-- transaction as the state change that causes it (package lease), and
-- delivered at least once by any instance: claimed with SKIP LOCKED and a
-- short lease (next_at moved past the attempt's timeout), then marked
-- delivered, gone (410) or, after a day of failures, expired.

-- +goose Up
CREATE TABLE IF NOT EXISTS webhook_outbox (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    msg_id       VARCHAR(40) NOT NULL,
    endpoint     VARCHAR(64) NOT NULL,
    type         VARCHAR(40) NOT NULL,
    broadcast_id BIGINT UNSIGNED NULL,
    body         MEDIUMBLOB NOT NULL,
    created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    status       ENUM('pending', 'delivered', 'gone', 'expired') NOT NULL DEFAULT 'pending',
    attempts     INT UNSIGNED NOT NULL DEFAULT 0,
    next_at      DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_status  SMALLINT NULL,
    last_error   VARCHAR(255) NULL,
    delivered_at DATETIME(6) NULL,
    UNIQUE KEY uq_webhook_msg (msg_id),
    KEY ix_webhook_due (status, next_at),
    KEY ix_webhook_endpoint (endpoint, id),
    KEY ix_webhook_broadcast (broadcast_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS webhook_outbox;
