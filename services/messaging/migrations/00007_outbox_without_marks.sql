-- +goose Up

-- The outbox holds only events not yet published (docs/architecture.md
-- "Customer events: the outbox and the EVENTS stream"): each is published
-- right after its commit and its row deleted once the stream has it, so no
-- row is marked published, and the indexes that found unpublished rows for
-- the relay and aged published ones for pruning go. Published rows still
-- here were in the stream already.
DROP INDEX messaging.outbox_pending_idx;
DROP INDEX messaging.outbox_published_idx;
DELETE FROM messaging.outbox WHERE published_at IS NOT NULL;
ALTER TABLE messaging.outbox DROP COLUMN published_at;

-- +goose Down
ALTER TABLE messaging.outbox ADD COLUMN published_at timestamptz;
CREATE INDEX outbox_pending_idx ON messaging.outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_published_idx ON messaging.outbox (published_at) WHERE published_at IS NOT NULL;
