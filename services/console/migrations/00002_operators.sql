-- +goose Up
-- An operator without a workspace is a platform operator and sees every
-- workspace. The workspace lives in the gateway's schema, which the console
-- never reads: its existence is checked through the gateway's admin
-- endpoint when the operator is created.
CREATE TABLE console.operators (
    id            uuid PRIMARY KEY,
    email         text NOT NULL,
    -- argon2id in PHC string form: the parameters travel with the hash.
    password_hash text NOT NULL,
    workspace_id  uuid,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- One operator per email, whatever its case.
CREATE UNIQUE INDEX operators_email_key ON console.operators (lower(email));

-- Only the SHA-256 of a session token is kept; the token is in the
-- browser's cookie.
CREATE TABLE console.sessions (
    id          uuid PRIMARY KEY,
    token_hash  bytea NOT NULL,
    operator_id uuid NOT NULL REFERENCES console.operators (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT sessions_token_hash_key UNIQUE (token_hash)
);

CREATE INDEX sessions_expires_at ON console.sessions (expires_at);

-- +goose Down
DROP TABLE console.sessions;
DROP TABLE console.operators;
