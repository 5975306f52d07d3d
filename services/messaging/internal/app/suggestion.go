package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Suggestion returns the waiting suggestion of the workspace's
// conversation; conversation.ErrNoSuggestion when none waits.
func (a *App) Suggestion(ctx context.Context, workspaceID, conversationID string) (conversation.Suggestion, error) {
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return conversation.Suggestion{}, err
	}
	return a.suggestions.Get(ctx, conv.ID)
}
