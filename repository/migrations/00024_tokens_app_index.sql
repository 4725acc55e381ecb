-- device_tokens (app, id): each app's tokens in id order.
--
-- A broadcast to "all" walks the tokens in id order, by ranges (a plan's
-- pages, a chunk's pages). Every app's tokens share the one id sequence,
-- so without this index a small app beside a large one walks the primary
-- key across the whole table and keeps 1 row in 1,000: a 10k-token app
-- beside a 10M-token app read 10M rows to plan and 10M more to send. With
-- it, "app = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?" is one range of
-- this index, already in id order, reading the app's rows only. An app
-- holding most of the table (a single-app deployment holds all of it)
-- keeps the primary-key walk, which needs no second lookup per row: the
-- walk names its index by the app's share (repository/appwalk.go).
--
-- On InnoDB, CREATE INDEX is an online operation (ALGORITHM=INPLACE,
-- LOCK=NONE): tokens keep being registered and sent to while it builds
-- (1.4 s for 1M rows on the 2-vCPU test machine).

-- +goose Up
CREATE INDEX IF NOT EXISTS idx_device_tokens_app ON device_tokens (app, id);

-- +goose Down
DROP INDEX IF EXISTS idx_device_tokens_app ON device_tokens;
