package adminclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/rpc"
)

// The conversations' chat state, the built-in AI's sends and drafts, and
// the waiting suggestion, on messaging's admin endpoint: the flow-runner's
// chat runs and the console's inbox call them. Every call names the
// workspace the conversation must belong to; another workspace's is 404
// conversation_not_found.

// conversationPath is the path of a conversation's route.
func conversationPath(conversationID, rest string) string {
	return "/admin/conversations/" + segment(conversationID) + rest
}

// inWorkspace is the query naming a workspace.
func inWorkspace(workspaceID string) url.Values {
	return url.Values{"workspace_id": {workspaceID}}
}

// Conversation returns the workspace's conversation with its chat state.
func (c *Client) Conversation(ctx context.Context, workspaceID, conversationID string) (messagingapi.ConversationState, error) {
	var out messagingapi.ConversationStateAnswer
	err := c.get(ctx, rpc.ServiceMessaging, conversationPath(conversationID, ""), inWorkspace(workspaceID), &out)
	return out.Conversation, err
}

// SendAIMessage sends a chat run's message to the customer (sender ai).
// A repeat of m.Key for the conversation is answered with the first send's
// message and sends nothing; 409 conversation_handed_over when the
// conversation is handed over, and the API's send errors otherwise
// (outside_messaging_window, platform_error, …).
func (c *Client) SendAIMessage(ctx context.Context, conversationID string, m messagingapi.SendAIMessage) (messagingapi.Message, error) {
	var out messagingapi.AIMessageSent
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, conversationPath(conversationID, "/ai-messages"), m, &out)
	return out.Message, err
}

// DraftSuggestion makes a chat run's messages the conversation's waiting
// suggestion, in place of an older one; idempotent by d.Key as
// SendAIMessage.
func (c *Client) DraftSuggestion(ctx context.Context, conversationID string, d messagingapi.DraftSuggestion) (messagingapi.Suggestion, error) {
	var out messagingapi.SuggestionAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPut, conversationPath(conversationID, "/suggestion"), d, &out)
	if out.Suggestion == nil {
		return messagingapi.Suggestion{}, err
	}
	return *out.Suggestion, err
}

// Suggestion returns the conversation's waiting suggestion, nil when none
// waits.
func (c *Client) Suggestion(ctx context.Context, workspaceID, conversationID string) (*messagingapi.Suggestion, error) {
	var out messagingapi.SuggestionAnswer
	err := c.get(ctx, rpc.ServiceMessaging, conversationPath(conversationID, "/suggestion"), inWorkspace(workspaceID), &out)
	return out.Suggestion, err
}

// SendSuggestion sends the waiting suggestion as an operator's reply
// (sender user), as drafted or, with s.Messages, as edited, and returns
// the messages sent; 404 suggestion_not_found when none waits.
func (c *Client) SendSuggestion(ctx context.Context, conversationID string, s messagingapi.SendSuggestion) ([]messagingapi.Message, error) {
	var out messagingapi.SuggestionSent
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, conversationPath(conversationID, "/suggestion/send"), s, &out)
	return out.Messages, err
}

// DiscardSuggestion drops the waiting suggestion, if one waits; given
// seen, only that draft (409 suggestion_replaced when another waits).
func (c *Client) DiscardSuggestion(ctx context.Context, workspaceID, conversationID string, seen *messagingapi.SuggestionSeen) (messagingapi.ConversationState, error) {
	var out messagingapi.ConversationStateAnswer
	q := inWorkspace(workspaceID)
	if seen != nil {
		q.Set("run_id", seen.RunID)
		q.Set("created_at", seen.CreatedAt)
	}
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodDelete, withQuery(conversationPath(conversationID, "/suggestion"), q), nil, &out)
	return out.Conversation, err
}

// changeConversation calls a route that changes a conversation's chat
// state and returns the conversation's new state.
func (c *Client) changeConversation(ctx context.Context, method, conversationID, rest string, change messagingapi.ChangeConversation) (messagingapi.ConversationState, error) {
	var out messagingapi.ConversationStateAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, method, conversationPath(conversationID, rest), change, &out)
	return out.Conversation, err
}

// HandOver stops the AI in the conversation until ResumeAI; reason says
// who or what handed it over, and why.
func (c *Client) HandOver(ctx context.Context, workspaceID, conversationID, reason string) (messagingapi.ConversationState, error) {
	return c.changeConversation(ctx, http.MethodPost, conversationID, "/handover", messagingapi.ChangeConversation{WorkspaceID: workspaceID, Reason: reason})
}

// ResumeAI lets the AI answer the conversation again.
func (c *Client) ResumeAI(ctx context.Context, workspaceID, conversationID string) (messagingapi.ConversationState, error) {
	return c.changeConversation(ctx, http.MethodPost, conversationID, "/resume-ai", messagingapi.ChangeConversation{WorkspaceID: workspaceID})
}

// AddTags adds tags to the conversation.
func (c *Client) AddTags(ctx context.Context, workspaceID, conversationID string, tags []string) (messagingapi.ConversationState, error) {
	return c.changeConversation(ctx, http.MethodPost, conversationID, "/tags", messagingapi.ChangeConversation{WorkspaceID: workspaceID, Tags: tags})
}

// Assign gives the conversation to the operator whose email is assignee;
// "" unassigns it.
func (c *Client) Assign(ctx context.Context, workspaceID, conversationID, assignee string) (messagingapi.ConversationState, error) {
	return c.changeConversation(ctx, http.MethodPut, conversationID, "/assignee", messagingapi.ChangeConversation{WorkspaceID: workspaceID, Assignee: &assignee})
}

// MarkUnanswered records why the conversation's last customer message got
// no answer (messagingapi.UnansweredAILimitReached,
// UnansweredAIUnavailable).
func (c *Client) MarkUnanswered(ctx context.Context, workspaceID, conversationID, reason string) (messagingapi.ConversationState, error) {
	return c.changeConversation(ctx, http.MethodPost, conversationID, "/unanswered", messagingapi.ChangeConversation{WorkspaceID: workspaceID, Reason: reason})
}

// InboxFilter narrows ListInbox: each field set keeps only the
// conversations that have it. Before is the cursor (next_before of the
// previous page), Limit the page's size (0: messaging's default).
type InboxFilter struct {
	Before            string
	Limit             int
	ChannelID         string
	Unanswered        bool
	SuggestionWaiting bool
	HandedOver        bool
	Assignee          string
}

// ListInbox returns a page of the workspace's conversations as the inbox
// lists them: most recent message first, each with its chat state and
// newest message.
func (c *Client) ListInbox(ctx context.Context, workspaceID string, f InboxFilter) (messagingapi.InboxPage, error) {
	q := inWorkspace(workspaceID)
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("before", f.Before)
	if f.Limit > 0 {
		set("limit", strconv.Itoa(f.Limit))
	}
	set("channel_id", f.ChannelID)
	for k, on := range map[string]bool{"unanswered": f.Unanswered, "suggestion": f.SuggestionWaiting, "handed_over": f.HandedOver} {
		if on {
			q.Set(k, "true")
		}
	}
	set("assignee", f.Assignee)
	var out messagingapi.InboxPage
	err := c.get(ctx, rpc.ServiceMessaging, "/admin/conversations", q, &out)
	return out, err
}

// ConversationMessages returns a page of the workspace conversation's
// messages, newest first; before is the cursor ("" for the newest), limit
// the page's size (0: messaging's default).
func (c *Client) ConversationMessages(ctx context.Context, workspaceID, conversationID, before string, limit int) (messagingapi.MessagePage, error) {
	q := inWorkspace(workspaceID)
	if before != "" {
		q.Set("before", before)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out messagingapi.MessagePage
	err := c.get(ctx, rpc.ServiceMessaging, conversationPath(conversationID, "/messages"), q, &out)
	return out, err
}

// SendOperatorMessage sends an operator's reply to the customer (sender
// user) through messaging's send path, with every rule of the platform
// (outside_messaging_window, platform_error, …).
func (c *Client) SendOperatorMessage(ctx context.Context, conversationID string, m messagingapi.SendOperatorMessage) (messagingapi.Message, error) {
	var out messagingapi.MessageSent
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, conversationPath(conversationID, "/messages"), m, &out)
	return out.Message, err
}
