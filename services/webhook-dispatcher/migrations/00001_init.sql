-- +goose Up

-- One webhook per workspace. The secret is kept in clear because every
-- delivery is signed with it; it is only ever shown in the response that
-- issued it.
CREATE TABLE dispatch.webhooks (
    id                   uuid        PRIMARY KEY,
    workspace_id         uuid        NOT NULL UNIQUE,
    url                  text        NOT NULL,
    secret               text        NOT NULL,
    status               text        NOT NULL CHECK (status IN ('active', 'paused')),
    consecutive_failures integer     NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL
);

-- The delivery log. id is the event id (the envelope id and
-- X-Service-Delivery), so a redelivered JetStream message finds its row
-- instead of creating a second one. payload is the exact body sent on every
-- attempt; attempt_history is a JSON array of
-- {number, started_at, duration_ms, response_status, error}.
CREATE TABLE dispatch.deliveries (
    id              uuid        PRIMARY KEY,
    workspace_id    uuid        NOT NULL,
    event           text        NOT NULL,
    payload         text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'skipped')),
    attempts        integer     NOT NULL DEFAULT 0,
    response_status integer,
    last_error      text,
    attempt_history jsonb       NOT NULL DEFAULT '[]',
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- The log is read per workspace, newest first, and purged by age.
CREATE INDEX deliveries_workspace_created_idx ON dispatch.deliveries (workspace_id, created_at DESC, id DESC);
CREATE INDEX deliveries_created_idx ON dispatch.deliveries (created_at);

-- +goose Down
DROP TABLE dispatch.deliveries;
DROP TABLE dispatch.webhooks;
