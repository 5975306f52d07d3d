package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// ConversationPage is one page of conversations and the cursor to the next.
type ConversationPage struct {
	Conversations []conversation.Conversation
	NextBefore    *time.Time
}

// ListConversations returns a workspace's conversations, most recent message
// first. q.Limit must be within 1..paging.MaxLimit.
func (a *App) ListConversations(ctx context.Context, q conversation.ConversationQuery) (ConversationPage, error) {
	fetch := func(before, at *time.Time, limit int) ([]conversation.Conversation, error) {
		p := q
		p.Before, p.At, p.Limit = before, at, limit
		return a.inbox.ListConversations(ctx, p)
	}
	stamp := func(c conversation.Conversation) time.Time { return c.LastMessageAt }
	rows, next, err := paging.Paginate(q.Before, q.Limit, fetch, stamp)
	if err != nil {
		return ConversationPage{}, err
	}
	return ConversationPage{Conversations: rows, NextBefore: next}, nil
}
