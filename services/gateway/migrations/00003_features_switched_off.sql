-- +goose Up
-- A feature an operator switched for a workspace is in features (switched
-- on) or features_off (switched off); one in neither takes its default, so
-- a feature that opens to everyone reaches every workspace nobody switched
-- it off for, new and existing.
ALTER TABLE accounts.workspaces ADD COLUMN features_off text[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN accounts.workspaces.features IS 'features switched on for the workspace';
COMMENT ON COLUMN accounts.workspaces.features_off IS 'features switched off for the workspace';

-- +goose Down
-- A switch off is lost: the feature takes its default again.
ALTER TABLE accounts.workspaces DROP COLUMN features_off;
COMMENT ON COLUMN accounts.workspaces.features IS NULL;
