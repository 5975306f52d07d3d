-- +goose Up

-- A conversation's chat state (docs/operations.md "Messaging and console
-- routes"): whether the built-in AI answers it, why its last customer
-- message went unanswered, its tags and assignee, and the number of its
-- chat turns. They live on the conversation's row because ingress reads
-- handed_over and turns with the row it updates anyway (the upsert of
-- every customer message), so a turn costs no extra statement: its
-- counter moves in the statement that stores the message. Every default
-- is a constant, so adding the columns rewrites no row.
ALTER TABLE messaging.conversations
    ADD COLUMN handed_over     boolean NOT NULL DEFAULT false,
    ADD COLUMN handover_reason text    NOT NULL DEFAULT '',
    ADD COLUMN unanswered      text    NOT NULL DEFAULT '',
    ADD COLUMN tags            jsonb   NOT NULL DEFAULT '[]',
    ADD COLUMN assignee        text    NOT NULL DEFAULT '',
    ADD COLUMN turns           bigint  NOT NULL DEFAULT 0;

-- A conversation's waiting suggestion: what a chat run on a suggest
-- channel drafted, for an operator to send, edit or discard. One at most;
-- a newer draft replaces it. In a table of its own, so that its messages
-- (up to ten, a few KiB) are not copied with the conversation's row on
-- every customer message.
CREATE TABLE messaging.suggestions (
    conversation_id uuid PRIMARY KEY REFERENCES messaging.conversations (id) ON DELETE CASCADE,
    workspace_id    uuid        NOT NULL,
    run_id          text        NOT NULL,
    -- [{"text": {...}} or {"carousel": {...}}], as the adapter encodes them
    messages        jsonb       NOT NULL,
    created_at      timestamptz NOT NULL
);

-- +goose Down
DROP TABLE messaging.suggestions;
ALTER TABLE messaging.conversations
    DROP COLUMN handed_over,
    DROP COLUMN handover_reason,
    DROP COLUMN unanswered,
    DROP COLUMN tags,
    DROP COLUMN assignee,
    DROP COLUMN turns;
