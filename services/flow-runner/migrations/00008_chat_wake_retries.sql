-- +goose Up

-- A delay's wake that failed for now is tried again later, backing off
-- (docs/chat.md "Operating it"), so that it does not hold back the wakes
-- due after it: wake_tries counts the failed tries of the conversation's
-- waiting run, and wake_retry_at is when the next is due (NULL while none
-- failed). Both are cleared when the conversation's waiting run changes.
ALTER TABLE flows.chat_conversations
    ADD COLUMN wake_tries    integer NOT NULL DEFAULT 0,
    ADD COLUMN wake_retry_at timestamptz;

-- +goose Down
ALTER TABLE flows.chat_conversations
    DROP COLUMN wake_retry_at,
    DROP COLUMN wake_tries;
