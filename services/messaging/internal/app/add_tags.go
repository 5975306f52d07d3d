package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// AddTags adds tags to the workspace's conversation, within the bounds of
// conversation.Chat.AddTags.
func (a *App) AddTags(ctx context.Context, workspaceID, id string, tags []string) (ConversationState, error) {
	return a.changeChat(ctx, workspaceID, id, func(c *conversation.Chat) error { return c.AddTags(tags) })
}
