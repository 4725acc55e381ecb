-- How many users a broadcast targets, beside its devices (targeted):
-- issue 46, item 11.
--
-- broadcasts.users_targeted  the users holding the broadcast's targeted
--                            tokens, each once however many devices they
--                            have and however many chunks those fell in.
--                            Counted once per plan, in the background
--                            (broadcast/plan, users.go), with the plan's
--                            predicates and snapshot; stored with the
--                            plan's last step, or just after it when the
--                            count came later (a count lost with its
--                            instance is counted again by a planner's
--                            sweep while the broadcast runs). NULL while
--                            it is counted, and for a broadcast planned
--                            before this column or whose count failed
--                            (the log says why): the API answers null,
--                            the console shows the devices alone.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS users_targeted BIGINT UNSIGNED NULL;

-- +goose Down
ALTER TABLE broadcasts DROP COLUMN IF EXISTS users_targeted;
