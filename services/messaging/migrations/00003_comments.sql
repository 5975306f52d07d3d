-- +goose Up
-- Comments on a channel's posts (Facebook feed, Instagram media), and how
-- each was answered.
CREATE TABLE messaging.comments (
    id                           uuid PRIMARY KEY,
    workspace_id                 uuid NOT NULL,
    channel_id                   uuid NOT NULL REFERENCES messaging.channels (id) ON DELETE CASCADE,
    platform                     text NOT NULL,
    -- the platform's comment id: comment.id in events, :id in the reply routes
    external_id                  text NOT NULL,
    post_id                      text NOT NULL DEFAULT '',
    parent_id                    text NOT NULL DEFAULT '',
    text                         text NOT NULL DEFAULT '',
    from_id                      text NOT NULL DEFAULT '',
    from_name                    text NOT NULL DEFAULT '',
    -- the platform's time of the comment; the private-reply window runs from it
    created_at                   timestamptz NOT NULL,
    stored_at                    timestamptz NOT NULL DEFAULT now(),
    status                       text NOT NULL DEFAULT 'received'
                                 CHECK (status IN ('received', 'replied', 'dm_sent', 'both_sent')),
    public_reply_id              text NOT NULL DEFAULT '',
    public_replied_at            timestamptz,
    -- set while the one private reply is being sent; cleared if it fails
    private_reply_claimed_at     timestamptz,
    private_reply_recipient_id   text NOT NULL DEFAULT '',
    private_reply_message_id     text NOT NULL DEFAULT '',
    private_reply_conversation_id uuid,
    private_replied_at           timestamptz,
    UNIQUE (channel_id, external_id)
);
-- The reply routes find a comment by the workspace and the platform's id.
CREATE INDEX comments_workspace_external_idx ON messaging.comments (workspace_id, external_id);
-- One private reply per commenter per window and page.
CREATE INDEX comments_commenter_replied_idx ON messaging.comments (channel_id, from_id, private_replied_at)
    WHERE private_replied_at IS NOT NULL;

-- +goose Down
DROP TABLE messaging.comments;
