-- +goose Up

-- A flow is the named thing operators publish and developers invoke; its
-- definitions are its versions. name, description and triggers are those of
-- the published version, copied here so that listing reads one table.
CREATE TABLE flows.flows (
    id                uuid        PRIMARY KEY,
    workspace_id      uuid        NOT NULL,
    name              text        NOT NULL,
    description       text        NOT NULL DEFAULT '',
    triggers          jsonb       NOT NULL DEFAULT '[]',
    status            text        NOT NULL CHECK (status IN ('active', 'inactive')),
    published_version integer     NOT NULL CHECK (published_version >= 1),
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);

CREATE INDEX flows_workspace ON flows.flows (workspace_id);

-- A version is immutable: the document exactly as published (bytea, so the
-- bytes parsed at publish are the bytes parsed at every load).
CREATE TABLE flows.flow_versions (
    flow_id    uuid        NOT NULL REFERENCES flows.flows (id),
    version    integer     NOT NULL CHECK (version >= 1),
    document   bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (flow_id, version)
);

-- A run of one flow version. session_id is set while (and after) the run
-- waited at a question, so that a continue finds it and a continue of a
-- finished run can be told apart from an unknown session.
CREATE TABLE flows.runs (
    id              uuid        PRIMARY KEY,
    flow_id         uuid        NOT NULL,
    version         integer     NOT NULL,
    workspace_id    uuid        NOT NULL,
    source          text        NOT NULL CHECK (source IN ('api', 'chat')),
    status          text        NOT NULL CHECK (status IN ('waiting', 'completed', 'failed')),
    current_node_id text        NOT NULL,
    nodes_executed  integer     NOT NULL DEFAULT 0,
    vars            jsonb       NOT NULL,
    output          jsonb       NOT NULL,
    messages        jsonb       NOT NULL,
    usage           jsonb       NOT NULL,
    error           jsonb,
    session_id      uuid        UNIQUE,
    started_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    updated_at      timestamptz NOT NULL,
    FOREIGN KEY (flow_id, version) REFERENCES flows.flow_versions (flow_id, version)
);

-- One row per node run, in the order they started over every call of the
-- run (seq counts on across continues).
CREATE TABLE flows.node_runs (
    run_id      uuid             NOT NULL REFERENCES flows.runs (id) ON DELETE CASCADE,
    seq         integer          NOT NULL,
    node_id     text             NOT NULL,
    node_type   text             NOT NULL,
    started_at  timestamptz      NOT NULL,
    duration_ms bigint           NOT NULL,
    input       jsonb,
    output      jsonb,
    error       text,
    tokens      integer          NOT NULL DEFAULT 0,
    cost_usd    double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
);

-- +goose Down
DROP TABLE flows.node_runs;
DROP TABLE flows.runs;
DROP TABLE flows.flow_versions;
DROP TABLE flows.flows;
