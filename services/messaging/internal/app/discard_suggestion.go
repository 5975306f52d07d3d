package app

import (
	"context"
)

// DiscardSuggestion drops the waiting suggestion of the workspace's
// conversation, if one waits, and returns the conversation's state.
func (a *App) DiscardSuggestion(ctx context.Context, workspaceID, conversationID string) (ConversationState, error) {
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return ConversationState{}, err
	}
	if err := a.suggestions.Discard(ctx, conv.ID); err != nil {
		return ConversationState{}, err
	}
	a.inboxChanged(conv.WorkspaceID, conv.ID)
	return a.state(conv, false), nil
}
