-- +goose Up
-- When a key last authenticated a request, to within a minute: the gateway
-- writes it only when the stored time is older than that (NULL: never used).
ALTER TABLE accounts.api_keys ADD COLUMN last_used_at timestamptz;

-- +goose Down
ALTER TABLE accounts.api_keys DROP COLUMN last_used_at;
