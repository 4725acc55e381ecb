-- `targeted` is known early, and never 0 while unknown (issue 38, part 3).
--
-- broadcasts.held_counted  1 once a held broadcast's audience has been
--                          counted (in the background after its submit,
--                          broadcast.Service.held): its targeted is that
--                          count. 0 before, and for every other broadcast,
--                          whose planning column and status say whether
--                          targeted is its audience's count
--                          (model.Broadcast.TargetedKnown). The API shows
--                          a held broadcast's targeted as null until then,
--                          where it showed 0. A release older than this
--                          column never sets it: its held counts read null
--                          until the broadcast is released and planned.
--                          The held broadcasts of an older release with a
--                          count stored are taken as counted.

-- +goose Up
ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS held_counted TINYINT(1) NOT NULL DEFAULT 0;
UPDATE broadcasts SET held_counted = 1 WHERE status = 'held' AND targeted > 0;

-- +goose Down
ALTER TABLE broadcasts DROP COLUMN IF EXISTS held_counted;
