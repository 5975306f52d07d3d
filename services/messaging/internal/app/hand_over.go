package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// HandOver stops the built-in AI in the workspace's conversation until
// ResumeAI: its customer messages are no chat turns meanwhile, and the
// AI's sends and drafts to it are refused (conversation.ErrHandedOver).
// reason says who or what handed it over, and why.
func (a *App) HandOver(ctx context.Context, workspaceID, id, reason string) (ConversationState, error) {
	return a.changeChat(ctx, workspaceID, id, func(c *conversation.Chat) error { return c.HandOver(reason) })
}
