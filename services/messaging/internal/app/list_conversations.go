package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// ConversationPage is one page of conversations and the cursor to the next.
type ConversationPage struct {
	Conversations []conversation.Conversation
	NextBefore    *time.Time
}

// ListConversations returns a workspace's conversations, most recent message
// first. q.Limit must be within 1..MaxPageSize.
func (a *App) ListConversations(ctx context.Context, q conversation.ConversationQuery) (ConversationPage, error) {
	fetch := func(before, at *time.Time, limit int) ([]conversation.Conversation, error) {
		p := q
		p.Before, p.At, p.Limit = before, at, limit
		return a.inbox.ListConversations(ctx, p)
	}
	stamp := func(c conversation.Conversation) time.Time { return c.LastMessageAt }
	rows, next, err := paginate(q.Before, q.Limit, fetch, stamp)
	if err != nil {
		return ConversationPage{}, err
	}
	return ConversationPage{Conversations: rows, NextBefore: next}, nil
}

// paginate fetches one page newest first and cuts it so that the cursor,
// a bare timestamp, walks every row exactly once (conversation.CutPage).
func paginate[T any](before *time.Time, limit int, fetch func(before, at *time.Time, limit int) ([]T, error), stamp func(T) time.Time) ([]T, *time.Time, error) {
	rows, err := fetch(before, nil, limit+1)
	if err != nil {
		return nil, nil, err
	}
	stamps := make([]time.Time, len(rows))
	for i, r := range rows {
		stamps[i] = stamp(r)
	}
	cut := conversation.CutPage(stamps, limit)
	if !cut.WholeGroup {
		return rows[:cut.Keep], cut.Next, nil
	}
	at := stamps[0]
	group, err := fetch(nil, &at, 0)
	if err != nil {
		return nil, nil, err
	}
	older, err := fetch(&at, nil, 1)
	if err != nil {
		return nil, nil, err
	}
	if len(older) == 0 {
		return group, nil, nil
	}
	return group, &at, nil
}
