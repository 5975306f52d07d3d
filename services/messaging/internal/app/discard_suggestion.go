package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// DiscardSuggestion drops the waiting suggestion of the workspace's
// conversation, if one waits, and returns the conversation's state. Given
// seen, the draft the operator read, only that one is dropped: another
// waiting is conversation.ErrSuggestionReplaced, and stays.
func (a *App) DiscardSuggestion(ctx context.Context, workspaceID, conversationID string, seen *conversation.SuggestionMark) (ConversationState, error) {
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return ConversationState{}, err
	}
	if err := a.suggestions.Discard(ctx, conv.ID, seen); err != nil {
		return ConversationState{}, err
	}
	a.inboxChanged(conv.WorkspaceID, conv.ID)
	return a.state(conv, false), nil
}
