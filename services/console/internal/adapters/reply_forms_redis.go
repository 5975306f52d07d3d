package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// ReplyForms keeps the reply forms sent in Redis, through the idempotency
// store every service's keys use (pkg/idempotency), for as long as it
// keeps a key (24 hours).
type ReplyForms struct {
	store *idempotency.Store
}

var _ app.ReplyForms = (*ReplyForms)(nil)

// NewReplyForms returns the reply forms kept in store.
func NewReplyForms(store *idempotency.Store) *ReplyForms {
	return &ReplyForms{store: store}
}

// Claim implements app.ReplyForms. The message is part of the key: another
// message sent from the same form (the browser's back button, the text
// changed) is a reply of its own.
func (f *ReplyForms) Claim(ctx context.Context, workspaceID, conversationID, formID string, m messagingapi.OutboundMessage) (app.ReplyClaim, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("reply fingerprint: %w", err)
	}
	fp := idempotency.Fingerprint(http.MethodPost, conversationID, body)
	res, err := f.store.Begin(ctx, workspaceID, formID+"/"+fp, fp)
	if err != nil {
		return nil, fmt.Errorf("claim reply: %w", err)
	}
	switch res.State {
	case idempotency.Claimed:
		return replyClaim{res.Claim}, nil
	case idempotency.InProgress:
		return nil, app.ErrReplySending
	}
	return nil, app.ErrReplySent
}

// replyClaim is app.ReplyClaim over an idempotency claim. Either write
// failing only loses the guard against a repeat, not the reply.
type replyClaim struct {
	claim *idempotency.Claim
}

func (c replyClaim) Sent(ctx context.Context, messageID string) {
	_ = c.claim.Complete(ctx, idempotency.Response{Status: http.StatusCreated, Ref: messageID})
}

func (c replyClaim) Refused(ctx context.Context) {
	_ = c.claim.Release(ctx)
}
