-- +goose Up

-- The answer to each invoke made with an Idempotency-Key, written in the
-- same statement or transaction as the run it answered: the durable side
-- of the keys Redis holds, so that a call that committed never runs again,
-- even when Redis lost its key or the process died before writing it
-- there. key_hash is a hash of the key (keys themselves are not stored);
-- body is the JSON answer, NULL when it was too large to replay.
CREATE TABLE flows.idempotency_receipts (
    workspace_id uuid        NOT NULL,
    key_hash     text        NOT NULL,
    fingerprint  text        NOT NULL,
    status       integer     NOT NULL,
    body         bytea,
    run_id       uuid        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, key_hash)
);

-- Receipts older than IDEMPOTENCY_TTL are purged by this index's order.
CREATE INDEX idempotency_receipts_created ON flows.idempotency_receipts (created_at);

-- +goose Down
DROP TABLE flows.idempotency_receipts;
