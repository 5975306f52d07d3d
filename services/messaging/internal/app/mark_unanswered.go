package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// MarkUnanswered records why the last customer message of the workspace's
// conversation got no answer (the plan's AI replies are used up, or the AI
// could not answer); the next message sent to the customer clears it.
func (a *App) MarkUnanswered(ctx context.Context, workspaceID, id, reason string) (ConversationState, error) {
	return a.changeChat(ctx, workspaceID, id, func(c *conversation.Chat) error { return c.MarkUnanswered(reason) })
}
