-- +goose Up

-- The answer to each send made with an Idempotency-Key, written in the
-- same transaction as the message(s) it sent (or the comment it replied
-- to): the durable side of the keys Redis holds, so that a send that
-- reached the customer never goes out again, even when Redis lost its key
-- or the process died before writing it there. key_hash is a hash of the
-- key (keys themselves are not stored); body is the JSON answer, NULL when
-- it was too large to replay; ref names what the send produced (a message
-- id, or the comment's platform id).
CREATE TABLE messaging.idempotency_receipts (
    workspace_id uuid        NOT NULL,
    key_hash     text        NOT NULL,
    fingerprint  text        NOT NULL,
    status       integer     NOT NULL,
    body         bytea,
    ref          text        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, key_hash)
);

-- Receipts older than IDEMPOTENCY_TTL are pruned by this index's order.
CREATE INDEX idempotency_receipts_created ON messaging.idempotency_receipts (created_at);

-- +goose Down
DROP TABLE messaging.idempotency_receipts;
