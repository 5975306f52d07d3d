-- +goose Up
-- One dedupe table for every platform: Telegram update ids, Meta message
-- ids, comment ids... each delivery key is taken once per channel.
CREATE TABLE messaging.ingress_receipts (
    channel_id  uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    key         text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel_id, key)
);
CREATE INDEX ingress_receipts_received_idx ON messaging.ingress_receipts (received_at);
INSERT INTO messaging.ingress_receipts (channel_id, key, received_at)
    SELECT channel_id, 'telegram:update:' || update_id, received_at FROM messaging.telegram_updates;
DROP TABLE messaging.telegram_updates;

-- +goose Down
CREATE TABLE messaging.telegram_updates (
    channel_id  uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    update_id   bigint NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel_id, update_id)
);
INSERT INTO messaging.telegram_updates (channel_id, update_id, received_at)
    SELECT channel_id, substring(key FROM 17)::bigint, received_at FROM messaging.ingress_receipts
    WHERE key LIKE 'telegram:update:%';
DROP TABLE messaging.ingress_receipts;
