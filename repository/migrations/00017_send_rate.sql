-- send_rate: a broadcast's outcomes per 5 seconds, added by each chunk
-- checkpoint in its transaction, so that a console page opened on a
-- running broadcast draws its sends per second from the start rather than
-- from when the page opened (the watch stream's own series begins with
-- its first viewer). Deleted with the broadcast by retention.

-- +goose Up
CREATE TABLE IF NOT EXISTS send_rate (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    at           DATETIME NOT NULL,
    n            BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (broadcast_id, at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS send_rate;
