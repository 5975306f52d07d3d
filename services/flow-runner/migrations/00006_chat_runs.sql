-- +goose Up

-- Chat runs (docs/chat.md "Chat runs"): a run answering a conversation's
-- customer on a channel whose built-in AI is on. The assistant's runs
-- have no flow, so flow_id and version become nullable, together; the
-- foreign key stays and checks every run that has them. A chat run names
-- its conversation and channel; wake_at is when one waiting at a delay
-- node goes on.
ALTER TABLE flows.runs
    ALTER COLUMN flow_id DROP NOT NULL,
    ALTER COLUMN version DROP NOT NULL,
    ADD COLUMN conversation_id uuid,
    ADD COLUMN channel_id      uuid,
    ADD COLUMN wake_at         timestamptz,
    ADD CONSTRAINT runs_flow_and_version CHECK ((flow_id IS NULL) = (version IS NULL)),
    ADD CONSTRAINT runs_api_has_flow CHECK (source = 'chat' OR flow_id IS NOT NULL),
    ADD CONSTRAINT runs_chat_has_conversation CHECK (
        source = 'api' OR (conversation_id IS NOT NULL AND channel_id IS NOT NULL));

-- The chat runs due to wake, soonest first: only waiting runs with a time.
CREATE INDEX runs_wake_at ON flows.runs (wake_at)
    WHERE status = 'waiting' AND wake_at IS NOT NULL;

-- A conversation's runs newest first (the operators' list filtered by
-- conversation, and the chat consumer's look-up of its waiting run). Only
-- chat runs have a conversation, so API runs take no room in it.
CREATE INDEX runs_conversation_started ON flows.runs (workspace_id, conversation_id, started_at DESC, id DESC)
    WHERE conversation_id IS NOT NULL;

-- A channel's chat flow (docs/chat.md "A channel's chat flow"): the flow
-- that answers its customers instead of the assistant. One per channel;
-- the channel is messaging's, known here by its id and workspace only.
CREATE TABLE flows.chat_flows (
    channel_id   uuid        PRIMARY KEY,
    workspace_id uuid        NOT NULL,
    flow_id      uuid        NOT NULL REFERENCES flows.flows (id),
    updated_at   timestamptz NOT NULL
);

-- +goose Down
DROP TABLE flows.chat_flows;
DROP INDEX flows.runs_conversation_started;
DROP INDEX flows.runs_wake_at;
-- The assistant's runs have no flow, and a runs table without chat runs
-- cannot hold them: they go, with their node runs (ON DELETE CASCADE).
DELETE FROM flows.runs WHERE flow_id IS NULL;
ALTER TABLE flows.runs
    DROP CONSTRAINT runs_chat_has_conversation,
    DROP CONSTRAINT runs_api_has_flow,
    DROP CONSTRAINT runs_flow_and_version,
    DROP COLUMN wake_at,
    DROP COLUMN channel_id,
    DROP COLUMN conversation_id,
    ALTER COLUMN version SET NOT NULL,
    ALTER COLUMN flow_id SET NOT NULL;
