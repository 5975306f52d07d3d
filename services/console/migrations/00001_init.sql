-- +goose Up
-- The console's own tables come in the migrations that follow; this one
-- only starts the schema's history.
SELECT 1;

-- +goose Down
SELECT 1;
