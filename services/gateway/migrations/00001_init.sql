-- +goose Up
CREATE TABLE accounts.workspaces (
    id              uuid PRIMARY KEY,
    name            text NOT NULL,
    slug            text NOT NULL,
    plan_name       text NOT NULL DEFAULT 'api',
    modules         text[] NOT NULL DEFAULT '{}',
    ai_used         bigint NOT NULL DEFAULT 0 CHECK (ai_used >= 0),
    ai_limit        bigint NOT NULL DEFAULT 0 CHECK (ai_limit >= 0),
    -- NULL: the gateway's RATE_LIMIT_PER_MINUTE applies.
    rate_per_minute integer CHECK (rate_per_minute >= 1),
    features        text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workspaces_slug_key UNIQUE (slug)
);

-- Only the SHA-256 of a key is kept; the plaintext is shown once.
CREATE TABLE accounts.api_keys (
    id             uuid PRIMARY KEY,
    workspace_id   uuid NOT NULL REFERENCES accounts.workspaces (id) ON DELETE CASCADE,
    name           text NOT NULL DEFAULT '',
    key_hash       text NOT NULL,
    display_prefix text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz,
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);

CREATE INDEX api_keys_workspace_id_idx ON accounts.api_keys (workspace_id);

-- +goose Down
DROP TABLE accounts.api_keys;
DROP TABLE accounts.workspaces;
