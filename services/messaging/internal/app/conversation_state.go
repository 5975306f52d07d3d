package app

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// ConversationState is a conversation as the inbox and the chat runs see
// it: with its chat state, and whether a suggestion waits.
type ConversationState struct {
	conversation.Conversation
	SuggestionWaiting bool
	// WindowEndsAt is when the platform's messaging window closes (the
	// customer's last message plus MESSAGING_WINDOW); zero on platforms
	// without one.
	WindowEndsAt time.Time
}

// ConversationState returns the workspace's conversation with its chat
// state; conversation.ErrNotFound for another workspace's.
func (a *App) ConversationState(ctx context.Context, workspaceID, id string) (ConversationState, error) {
	conv, err := a.inbox.Get(ctx, workspaceID, id)
	if err != nil {
		return ConversationState{}, err
	}
	return a.stateOf(ctx, conv)
}

// changeChat lets change alter the chat state of the workspace's
// conversation, under its row's lock, and returns the conversation as
// saved; an error from change changes nothing.
func (a *App) changeChat(ctx context.Context, workspaceID, id string, change func(*conversation.Chat) error) (ConversationState, error) {
	conv, err := a.inbox.UpdateChat(ctx, workspaceID, id, change)
	if err != nil {
		return ConversationState{}, err
	}
	a.inboxChanged(conv.WorkspaceID, conv.ID)
	return a.stateOf(ctx, conv)
}

func (a *App) stateOf(ctx context.Context, conv conversation.Conversation) (ConversationState, error) {
	_, err := a.suggestions.Get(ctx, conv.ID)
	if err != nil && !errors.Is(err, conversation.ErrNoSuggestion) {
		return ConversationState{}, err
	}
	return a.state(conv, err == nil), nil
}

// state is conv's ConversationState, with whether a suggestion waits.
func (a *App) state(conv conversation.Conversation, suggestionWaiting bool) ConversationState {
	s := ConversationState{Conversation: conv, SuggestionWaiting: suggestionWaiting}
	if conversation.HasWindow(conv.Platform) && !conv.LastCustomerMessageAt.IsZero() {
		s.WindowEndsAt = conv.LastCustomerMessageAt.Add(a.window)
	}
	return s
}
