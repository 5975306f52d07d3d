package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// ResumeAI lets the built-in AI answer the workspace's conversation again,
// from its next customer message.
func (a *App) ResumeAI(ctx context.Context, workspaceID, id string) (ConversationState, error) {
	return a.changeChat(ctx, workspaceID, id, func(c *conversation.Chat) error {
		c.ResumeAI()
		return nil
	})
}
