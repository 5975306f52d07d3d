package main

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
)

// fakeInbox is the fake messaging's conversations, in messaging's JSON,
// with the calls that would change one; fakeMessaging.mu guards it.
type fakeInbox struct {
	conversations map[string]*fakeConversation
	// changes are the calls that change a conversation ("POST
	// /admin/conversations/:id/handover"), replies the operators' sends.
	changes []string
	replies []messagingapi.SendOperatorMessage
	// sentSuggestions are the suggestion sends the fake made (a send
	// refused, none waiting or another than the one seen, is not one).
	sentSuggestions []messagingapi.SendSuggestion
	// sendRefusal, when set, answers the next operator's send instead.
	sendRefusal *errs.Error
}

// fakeConversation is one conversation: its chat state, its messages
// newest first, and the waiting suggestion.
type fakeConversation struct {
	state      messagingapi.ConversationState
	messages   []messagingapi.Message
	suggestion *messagingapi.Suggestion
}

// conversation adds a conversation of workspace id on ch (its state's
// contact and window as given) with messages, oldest first, and returns
// its id.
func (m *fakeMessaging) conversation(workspaceID string, ch messagingapi.AdminChannel, state messagingapi.ConversationState, messages ...messagingapi.Message) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inbox.conversations == nil {
		m.inbox.conversations = map[string]*fakeConversation{}
	}
	id := uuid.NewString()
	state.ID, state.WorkspaceID, state.ChannelID, state.Platform = id, workspaceID, ch.ID, ch.Kind
	if state.AI == "" {
		state.AI = messagingapi.ConversationAIOn
	}
	state.CreatedAt, state.LastMessageAt = "2026-11-24T04:00:00Z", "2026-11-24T04:05:00Z"
	conv := &fakeConversation{state: state}
	for i, msg := range messages {
		msg.ID, msg.ConversationID = uuid.NewString(), id
		msg.CreatedAt = time.Date(2026, 11, 24, 4, i, 0, 0, time.UTC).Format(time.RFC3339)
		conv.messages = append([]messagingapi.Message{msg}, conv.messages...)
	}
	m.inbox.conversations[id] = conv
	return id
}

// suggest makes s the conversation's waiting suggestion.
func (m *fakeMessaging) suggest(conversationID string, s messagingapi.Suggestion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	conv := m.inbox.conversations[conversationID]
	conv.suggestion, conv.state.SuggestionWaiting = &s, true
}

// inboxChanges are the changing calls that reached the fake.
func (m *fakeMessaging) inboxChanges() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.inbox.changes...)
}

// serveInbox adds messaging's admin conversation routes to e. Every
// conversation is looked up with the workspace the call names, and
// another workspace's is 404 conversation_not_found, as messaging does.
func (m *fakeMessaging) serveInbox(e *echo.Echo) {
	// of is the call's conversation, with m.mu held; workspace is the
	// one the query or body names.
	of := func(c echo.Context, workspace string) (*fakeConversation, error) {
		conv, ok := m.inbox.conversations[c.Param("id")]
		if !ok || conv.state.WorkspaceID != workspace {
			return nil, errs.NotFound("conversation_not_found", "conversation not found")
		}
		return conv, nil
	}
	stateAnswer := func(c echo.Context, conv *fakeConversation) error {
		return c.JSON(http.StatusOK, messagingapi.ConversationStateAnswer{Conversation: conv.state})
	}
	e.GET("/admin/conversations", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		page := messagingapi.InboxPage{Conversations: []messagingapi.InboxConversation{}}
		q := c.QueryParam
		for _, conv := range m.inbox.conversations {
			// The list's filters, as messaging applies them.
			st := conv.state
			if st.WorkspaceID != q("workspace_id") || q("channel_id") != "" && st.ChannelID != q("channel_id") ||
				q("unanswered") == "true" && st.Unanswered == "" || q("suggestion") == "true" && !st.SuggestionWaiting ||
				q("handed_over") == "true" && st.AI != messagingapi.ConversationHandedOver || q("assignee") != "" && st.Assignee != q("assignee") {
				continue
			}
			row := messagingapi.InboxConversation{ConversationState: conv.state}
			if len(conv.messages) > 0 {
				last := conv.messages[0]
				row.LastMessage = &last
			}
			page.Conversations = append(page.Conversations, row)
		}
		return c.JSON(http.StatusOK, page)
	})
	e.GET("/admin/conversations/:id", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		conv, err := of(c, c.QueryParam("workspace_id"))
		if err != nil {
			return err
		}
		return stateAnswer(c, conv)
	})
	e.GET("/admin/conversations/:id/messages", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		conv, err := of(c, c.QueryParam("workspace_id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, messagingapi.MessagePage{Messages: append([]messagingapi.Message{}, conv.messages...)})
	})
	e.GET("/admin/conversations/:id/suggestion", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		conv, err := of(c, c.QueryParam("workspace_id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, messagingapi.SuggestionAnswer{Suggestion: conv.suggestion})
	})
	e.POST("/admin/conversations/:id/messages", func(c echo.Context) error {
		var in messagingapi.SendOperatorMessage
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inbox.changes = append(m.inbox.changes, c.Request().Method+" "+c.Path())
		conv, err := of(c, in.WorkspaceID)
		if err != nil {
			return err
		}
		m.inbox.replies = append(m.inbox.replies, in)
		if refusal := m.inbox.sendRefusal; refusal != nil {
			m.inbox.sendRefusal = nil
			return refusal
		}
		sent := messagingapi.Message{ID: uuid.NewString(), ConversationID: conv.state.ID, Sender: messagingapi.SenderUser, Type: "text",
			Content: in.Message.Text, Metadata: map[string]any{"operator": in.Operator}, CreatedAt: time.Now().UTC().Format(time.RFC3339)}
		conv.messages = append([]messagingapi.Message{sent}, conv.messages...)
		return c.JSON(http.StatusCreated, messagingapi.MessageSent{Message: sent})
	})
	e.POST("/admin/conversations/:id/suggestion/send", func(c echo.Context) error {
		var in messagingapi.SendSuggestion
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inbox.changes = append(m.inbox.changes, c.Request().Method+" "+c.Path())
		conv, err := of(c, in.WorkspaceID)
		if err != nil {
			return err
		}
		if conv.suggestion == nil {
			return errs.NotFound("suggestion_not_found", "no suggestion waits")
		}
		if in.Seen != nil && !isDraft(conv.suggestion, *in.Seen) {
			return errs.New(http.StatusConflict, "suggestion_replaced", "a newer suggestion replaced the one named")
		}
		m.inbox.sentSuggestions = append(m.inbox.sentSuggestions, in)
		conv.suggestion, conv.state.SuggestionWaiting = nil, false
		return c.JSON(http.StatusCreated, messagingapi.SuggestionSent{Messages: []messagingapi.Message{}})
	})
	e.DELETE("/admin/conversations/:id/suggestion", func(c echo.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inbox.changes = append(m.inbox.changes, c.Request().Method+" "+c.Path())
		conv, err := of(c, c.QueryParam("workspace_id"))
		if err != nil {
			return err
		}
		seen := messagingapi.SuggestionSeen{RunID: c.QueryParam("run_id"), CreatedAt: c.QueryParam("created_at")}
		if seen.RunID != "" && conv.suggestion != nil && !isDraft(conv.suggestion, seen) {
			return errs.New(http.StatusConflict, "suggestion_replaced", "a newer suggestion replaced the one named")
		}
		conv.suggestion, conv.state.SuggestionWaiting = nil, false
		return stateAnswer(c, conv)
	})
	change := func(c echo.Context) error {
		var in messagingapi.ChangeConversation
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inbox.changes = append(m.inbox.changes, c.Request().Method+" "+c.Path())
		conv, err := of(c, in.WorkspaceID)
		if err != nil {
			return err
		}
		// Tags are added and the assignee set, as messaging does.
		conv.state.Tags = append(conv.state.Tags, in.Tags...)
		if in.Assignee != nil {
			conv.state.Assignee = *in.Assignee
		}
		return stateAnswer(c, conv)
	}
	for _, path := range []string{"handover", "resume-ai", "tags"} {
		e.POST("/admin/conversations/:id/"+path, change)
	}
	e.PUT("/admin/conversations/:id/assignee", change)
}

// isDraft reports whether s is the draft seen names, as messaging tells.
func isDraft(s *messagingapi.Suggestion, seen messagingapi.SuggestionSeen) bool {
	return s.RunID == seen.RunID && s.CreatedAt == seen.CreatedAt
}
