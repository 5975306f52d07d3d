package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// SendAIMessage sends a message of chat run runID to the customer of the
// workspace's conversation, through the one send path with every rule of
// its platform: stored with sender ai and the run's id in its metadata,
// never forwarded to the webhook. It is refused when the conversation is
// handed over (conversation.ErrHandedOver). rr, the receipt of the run's
// key, makes a repeat answer the first send without sending again.
func (a *App) SendAIMessage(ctx context.Context, workspaceID, conversationID, runID string, o conversation.Outbound, rr *ReceiptRequest[conversation.Message]) (conversation.Message, error) {
	return a.sendOutbound(ctx, workspaceID, conversationID, conversation.Author{Sender: conversation.SenderAI, RunID: runID}, o, rr)
}

// sendOutbound sends o, a text or a carousel, from by.
func (a *App) sendOutbound(ctx context.Context, workspaceID, conversationID string, by conversation.Author, o conversation.Outbound, rr *ReceiptRequest[conversation.Message]) (conversation.Message, error) {
	if err := o.Validate(); err != nil {
		return conversation.Message{}, err
	}
	if o.Carousel != nil {
		return a.SendCarousel(ctx, workspaceID, conversationID, by, *o.Carousel, rr)
	}
	return a.SendMessage(ctx, workspaceID, conversationID, by, *o.Text, rr)
}
