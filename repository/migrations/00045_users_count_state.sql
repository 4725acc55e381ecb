-- The state of a broadcast's count of users (users_targeted, 00041), so
-- that no instance counts again a count that is running or that failed
-- for good (broadcast/plan, users.go).
--
-- broadcasts.users_count_at     when an instance last began a count of
--                               the broadcast's users (a plan's run, or
--                               the sweep for lost counts). Another run
--                               of the plan (hand-back, takeover, restart)
--                               or another sweep counts only once it is
--                               older than a count can take: a resumed
--                               plan does not scan its audience again.
-- broadcasts.users_count_error  why the count failed for good (the
--                               database's time limit, an error in a named
--                               audience, an audience too large to walk);
--                               NULL while none did. Never counted again:
--                               users_targeted stays NULL and the console
--                               says "users not counted" with the reason.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS users_count_at DATETIME(6) NULL,
    ADD COLUMN IF NOT EXISTS users_count_error VARCHAR(255) NULL;

-- +goose Down
ALTER TABLE broadcasts DROP COLUMN IF EXISTS users_count_error, DROP COLUMN IF EXISTS users_count_at;
