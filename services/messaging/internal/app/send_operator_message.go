package app

import (
	"context"
	"strings"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// SendOperatorMessage sends an operator's reply, typed in the console's
// inbox, to the customer of the workspace's conversation: through the one
// send path with every rule of its platform (the messaging window
// included), stored with sender user and the operator (an email, when
// given) in its metadata, as a sent suggestion is. It does not end a
// handover nor start one: the AI keeps answering the next customer message
// unless an operator hands the conversation over.
func (a *App) SendOperatorMessage(ctx context.Context, workspaceID, conversationID, operator string, o conversation.Outbound) (conversation.Message, error) {
	operator = strings.ToLower(strings.TrimSpace(operator))
	if operator != "" {
		if err := conversation.CheckEmail("operator", operator); err != nil {
			return conversation.Message{}, err
		}
	}
	return a.sendOutbound(ctx, workspaceID, conversationID, conversation.Author{Sender: conversation.SenderUser, Operator: operator}, o, nil)
}
