package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// AssignConversation gives the workspace's conversation to the operator
// whose email is assignee; "" unassigns it.
func (a *App) AssignConversation(ctx context.Context, workspaceID, id, assignee string) (ConversationState, error) {
	return a.changeChat(ctx, workspaceID, id, func(c *conversation.Chat) error { return c.Assign(assignee) })
}
