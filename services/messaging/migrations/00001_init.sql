-- +goose Up

CREATE TABLE messaging.channels (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('telegram', 'messenger', 'instagram', 'webchat')),
    -- the channel's id on the platform (Telegram bot id, Facebook page id)
    external_id  text NOT NULL DEFAULT '',
    -- credentials towards the platform; never returned by any API
    token        text NOT NULL DEFAULT '',
    -- what the platform must present to us (Telegram's secret token)
    secret       text NOT NULL,
    ai_mode      text NOT NULL DEFAULT 'auto' CHECK (ai_mode IN ('auto', 'suggest', 'external')),
    status       text NOT NULL DEFAULT 'active',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX channels_workspace_idx ON messaging.channels (workspace_id, created_at, id);
-- Platforms address a channel by its external id (Meta routes by entry[].id),
-- so it must name one channel.
CREATE UNIQUE INDEX channels_kind_external_id_key ON messaging.channels (kind, external_id) WHERE external_id <> '';

CREATE TABLE messaging.contacts (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    channel_id   uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    sender_id    text NOT NULL,
    name         text NOT NULL DEFAULT '',
    profile_pic  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (channel_id, sender_id)
);

CREATE TABLE messaging.conversations (
    id                       uuid PRIMARY KEY,
    workspace_id             uuid NOT NULL,
    channel_id               uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    contact_id               uuid NOT NULL REFERENCES messaging.contacts (id) ON DELETE CASCADE,
    platform                 text NOT NULL,
    -- where replies go on the platform (Telegram chat id)
    reply_to                 text NOT NULL,
    last_message_at          timestamptz NOT NULL,
    -- platform timestamp of the customer's latest message (24-hour window)
    last_customer_message_at timestamptz,
    created_at               timestamptz NOT NULL DEFAULT now(),
    UNIQUE (channel_id, contact_id)
);
CREATE INDEX conversations_recent_idx ON messaging.conversations (workspace_id, last_message_at DESC, id DESC);
CREATE INDEX conversations_platform_recent_idx ON messaging.conversations (workspace_id, platform, last_message_at DESC, id DESC);

CREATE TABLE messaging.messages (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL,
    conversation_id uuid NOT NULL REFERENCES messaging.conversations (id) ON DELETE CASCADE,
    sender          text NOT NULL CHECK (sender IN ('contact', 'user', 'ai')),
    type            text NOT NULL,
    content         text NOT NULL DEFAULT '',
    metadata        jsonb NOT NULL DEFAULT '{}',
    external_id     text NOT NULL DEFAULT '',
    -- the platform's timestamp for customer messages
    created_at      timestamptz NOT NULL
);
CREATE INDEX messages_conversation_recent_idx ON messaging.messages (conversation_id, created_at DESC, id DESC);

-- Telegram retries an update until it gets a 2xx; each update_id is taken once.
CREATE TABLE messaging.telegram_updates (
    channel_id  uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    update_id   bigint NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel_id, update_id)
);

-- Customer events, written in the message's transaction and published by the relay.
CREATE TABLE messaging.outbox (
    seq          bigserial PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    subject      text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX outbox_pending_idx ON messaging.outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_published_idx ON messaging.outbox (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP TABLE messaging.outbox;
DROP TABLE messaging.telegram_updates;
DROP TABLE messaging.messages;
DROP TABLE messaging.conversations;
DROP TABLE messaging.contacts;
DROP TABLE messaging.channels;
