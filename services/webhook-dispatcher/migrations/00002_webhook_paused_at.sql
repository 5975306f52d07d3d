-- +goose Up

-- When the pause rule paused the webhook; NULL unless it is paused. A
-- webhook paused before this column existed takes its last update, which
-- the pause set.
ALTER TABLE dispatch.webhooks ADD COLUMN paused_at timestamptz NULL;
UPDATE dispatch.webhooks SET paused_at = updated_at WHERE status = 'paused';

-- +goose Down
ALTER TABLE dispatch.webhooks DROP COLUMN paused_at;
