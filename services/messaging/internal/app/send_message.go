package app

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// SendMessage sends a text (with quick replies or buttons) to the customer
// of a workspace's conversation and stores it as sent by a user. Nothing is
// stored when the platform does not take it, and nothing goes to the outbox:
// the developer's own replies are never webhook events.
func (a *App) SendMessage(ctx context.Context, workspaceID, conversationID string, o conversation.OutboundText) (conversation.Message, error) {
	if err := o.Validate(); err != nil {
		return conversation.Message{}, err
	}
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return conversation.Message{}, err
	}
	platform := string(conv.Platform)
	transport, ok := a.transports[conv.Platform]
	if !ok {
		a.metrics.send(platform, SendUnsupported)
		return conversation.Message{}, &conversation.UnsupportedPlatformError{Platform: conv.Platform}
	}
	ch, err := a.channels.Get(ctx, conv.ChannelID)
	if err != nil {
		a.metrics.send(platform, SendError)
		return conversation.Message{}, fmt.Errorf("load channel of conversation %s: %w", conv.ID, err)
	}
	sent, err := transport.SendText(ctx, conversation.Target{Channel: ch, Conversation: conv}, o)
	if err != nil {
		var fe *conversation.FieldError
		var pe *conversation.PlatformError
		switch {
		case errors.As(err, &fe):
			a.metrics.send(platform, SendInvalid)
		case errors.As(err, &pe):
			a.metrics.send(platform, SendRefused)
		default:
			a.metrics.send(platform, SendError)
		}
		return conversation.Message{}, err
	}
	msg := conversation.Message{
		ID: a.newID(), WorkspaceID: conv.WorkspaceID, ConversationID: conv.ID,
		Sender: conversation.SenderUser, Type: conversation.TypeText, Content: o.Text,
		Metadata: o.Metadata(), ExternalID: sent.ExternalID, CreatedAt: a.timestamp(),
	}
	if err := a.inbox.AddSent(ctx, msg); err != nil {
		// The customer has the message; only our copy is missing. Say so
		// in the log, where an operator can find the platform's id.
		a.log.Error("sent message not stored", zap.String("conversation_id", conv.ID),
			zap.String("platform", platform), zap.String("external_id", sent.ExternalID), zap.Error(err))
		a.metrics.send(platform, SendError)
		return conversation.Message{}, fmt.Errorf("store sent message: %w", err)
	}
	a.metrics.send(platform, SendSent)
	return msg, nil
}
