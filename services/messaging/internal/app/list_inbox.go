package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// InboxEntry is one conversation of the inbox's list: its chat state and
// its newest message (nil when it has none).
type InboxEntry struct {
	ConversationState
	LastMessage *conversation.Message
}

// InboxPage is one page of the inbox and the cursor to the next.
type InboxPage struct {
	Entries    []InboxEntry
	NextBefore *time.Time
}

// ListInbox returns a page of the workspace's conversations as the
// console's inbox lists them: filtered by q.Inbox, most recent message
// first with the API's cursor (ListConversations), each with its chat
// state and newest message.
func (a *App) ListInbox(ctx context.Context, q conversation.ConversationQuery) (InboxPage, error) {
	page, err := a.ListConversations(ctx, q)
	if err != nil {
		return InboxPage{}, err
	}
	ids := make([]string, len(page.Conversations))
	for i, c := range page.Conversations {
		ids[i] = c.ID
	}
	last, err := a.inbox.LastMessages(ctx, ids)
	if err != nil {
		return InboxPage{}, err
	}
	waiting, err := a.suggestions.Waiting(ctx, ids)
	if err != nil {
		return InboxPage{}, err
	}
	out := InboxPage{Entries: make([]InboxEntry, len(page.Conversations)), NextBefore: page.NextBefore}
	for i, c := range page.Conversations {
		out.Entries[i] = InboxEntry{ConversationState: a.state(c, waiting[c.ID])}
		if m, ok := last[c.ID]; ok {
			out.Entries[i].LastMessage = &m
		}
	}
	return out, nil
}
