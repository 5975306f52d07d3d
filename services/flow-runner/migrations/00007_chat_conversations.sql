-- +goose Up

-- What the chat runs keep of each conversation they answer
-- (docs/chat.md "Order and exactly one answer"): the seq of the last chat
-- turn answered, so that a turn redelivered is answered once and a turn
-- that comes before its predecessor was answered waits for it; and the run
-- that waits in the conversation (at a question or a delay node). An
-- instance answering a turn holds the row locked for the whole answer.
CREATE TABLE flows.chat_conversations (
    conversation_id uuid        PRIMARY KEY,
    workspace_id    uuid        NOT NULL,
    answered_seq    bigint      NOT NULL DEFAULT 0,
    -- mode is the channel's mode of the turn answered last: auto or
    -- suggest. A run woken from a delay answers in it.
    mode            text        NOT NULL DEFAULT 'auto' CHECK (mode IN ('auto', 'suggest')),
    waiting_run_id  uuid        REFERENCES flows.runs (id),
    waiting_since   timestamptz,
    updated_at      timestamptz NOT NULL
);

-- +goose Down
DROP TABLE flows.chat_conversations;
