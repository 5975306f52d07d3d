-- +goose Up

-- A delivery's claim no longer checks its channel: the foreign key took a
-- FOR KEY SHARE lock on the channel's row for every claim, so every
-- message of a busy channel wrote to that one row. Ingress claims only for
-- a channel it has just read, channels are never deleted, and claims go
-- after INGRESS_DEDUPE_RETENTION anyway (docs/architecture.md "Ingress").
ALTER TABLE messaging.ingress_receipts DROP CONSTRAINT ingress_receipts_channel_id_fkey;

-- Every customer message moves its conversation's last_message_at, which
-- both list indexes hold, so that update can never be HOT; the ones after
-- it (a chat turn's counter, the chat state an operator changes) touch no
-- indexed column and are HOT when the row's page has room, which a tenth
-- of each page kept free gives them. Only pages written from now on keep
-- it.
ALTER TABLE messaging.conversations SET (fillfactor = 90);

-- +goose Down
ALTER TABLE messaging.conversations RESET (fillfactor);
DELETE FROM messaging.ingress_receipts AS r
    WHERE NOT EXISTS (SELECT 1 FROM messaging.channels AS c WHERE c.id = r.channel_id);
ALTER TABLE messaging.ingress_receipts ADD CONSTRAINT ingress_receipts_channel_id_fkey
    FOREIGN KEY (channel_id) REFERENCES messaging.channels (id) ON DELETE CASCADE;
