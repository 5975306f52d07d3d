package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// DraftSuggestion makes msgs, what chat run runID drafted in answer to the
// customer, the waiting suggestion of the workspace's conversation, in
// place of any older one. It is refused when the conversation is handed
// over (conversation.ErrHandedOver). rr, the receipt of the run's key, is
// stored with the draft, so that a repeat answers the first draft and
// brings back no suggestion an operator has sent or discarded since.
func (a *App) DraftSuggestion(ctx context.Context, workspaceID, conversationID, runID string, msgs []conversation.Outbound, rr *ReceiptRequest[conversation.Suggestion]) (conversation.Suggestion, error) {
	if err := conversation.CheckMessages(msgs); err != nil {
		return conversation.Suggestion{}, err
	}
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return conversation.Suggestion{}, err
	}
	if err := (conversation.Author{Sender: conversation.SenderAI, RunID: runID}).CheckSend(conv); err != nil {
		a.observer.Send(string(conv.Platform), SendHandedOver)
		return conversation.Suggestion{}, err
	}
	s := conversation.Suggestion{
		ConversationID: conv.ID, WorkspaceID: conv.WorkspaceID, RunID: runID, Messages: msgs, CreatedAt: a.timestamp(),
	}
	if err := a.suggestions.Draft(ctx, s, rr.receipt(a.observer, conv.WorkspaceID, runID, s, nil)); err != nil {
		return conversation.Suggestion{}, err
	}
	a.inboxChanged(conv.WorkspaceID, conv.ID)
	return s, nil
}
