-- +goose Up

-- The purge no longer needs an index of its own on every delivery. Event
-- ids are UUIDv7, ordered by the time they were made, and a delivery is
-- recorded after its event is made, so the deliveries older than a cutoff
-- are at the start of the primary key; the B-tree on created_at, one more
-- insert per delivery, goes. Ids of another version (test events sent
-- before they took UUIDv7 too, tests' events) are found through a partial
-- index that holds only them.
DROP INDEX dispatch.deliveries_created_idx;
CREATE INDEX deliveries_not_v7_created_idx ON dispatch.deliveries (created_at)
    WHERE substr(id::text, 15, 1) <> '7';

-- Most deliveries are written once, settled; those that run long or fail
-- are updated. None of the columns an update writes is indexed, so the
-- update can stay on the row's page (a HOT update, no index insert) when
-- the page has room for the new version: leave a fifth of each page for it.
ALTER TABLE dispatch.deliveries SET (fillfactor = 80);

-- +goose Down
ALTER TABLE dispatch.deliveries RESET (fillfactor);
DROP INDEX dispatch.deliveries_not_v7_created_idx;
CREATE INDEX deliveries_created_idx ON dispatch.deliveries (created_at);
