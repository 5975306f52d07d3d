package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// FindContact returns the channel's contact whose platform id is senderID,
// or conversation.ErrContactNotFound for a customer the channel has not
// heard from yet. Ingress uses it to read a platform profile only for new
// customers.
func (a *App) FindContact(ctx context.Context, channelID, senderID string) (conversation.Contact, error) {
	return a.inbox.FindContact(ctx, channelID, senderID)
}
