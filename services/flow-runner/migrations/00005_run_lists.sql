-- +goose NO TRANSACTION
-- +goose Up

-- The operators' list of runs (GET /admin/workspaces/:ws/runs): a
-- workspace's runs newest first, or one flow's. Built concurrently, outside
-- a transaction, so that invokes keep writing runs while a large table is
-- indexed.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_workspace_started ON flows.runs (workspace_id, started_at DESC, id DESC);
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_flow_started ON flows.runs (flow_id, started_at DESC, id DESC);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS flows.runs_flow_started;
DROP INDEX CONCURRENTLY IF EXISTS flows.runs_workspace_started;
