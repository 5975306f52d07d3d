package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// MessagePage is one page of a conversation's messages and the cursor to
// the next.
type MessagePage struct {
	Messages   []conversation.Message
	NextBefore *time.Time
}

// ListMessages returns a workspace conversation's messages, newest first;
// conversation.ErrNotFound for a conversation of another workspace. limit
// must be within 1..paging.MaxLimit.
func (a *App) ListMessages(ctx context.Context, workspaceID, conversationID string, before *time.Time, limit int) (MessagePage, error) {
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return MessagePage{}, err
	}
	fetch := func(before, at *time.Time, limit int) ([]conversation.Message, error) {
		return a.inbox.ListMessages(ctx, conversation.MessageQuery{ConversationID: conv.ID, Before: before, At: at, Limit: limit})
	}
	stamp := func(m conversation.Message) time.Time { return m.CreatedAt }
	rows, next, err := paging.Paginate(before, limit, fetch, stamp)
	if err != nil {
		return MessagePage{}, err
	}
	return MessagePage{Messages: rows, NextBefore: next}, nil
}
