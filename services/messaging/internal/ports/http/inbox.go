package http

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// The console inbox's own routes (docs/operations.md "Messaging and
// console routes"): its list of conversations, a conversation's messages
// and an operator's reply. The rest of what the inbox does goes through
// the conversation routes of conversations.go.

// GET /admin/conversations?workspace_id=W&before=&limit=&channel_id=&unanswered=&suggestion=&handed_over=&assignee=
//
// Paged as GET /v1/conversations (listConversations).
func (h *adminHandlers) listInbox(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	q := conversation.ConversationQuery{WorkspaceID: ws}
	if q.Before, q.Limit, err = pageParams(c); err != nil {
		return err
	}
	if id := c.QueryParam("channel_id"); id != "" {
		if !channel.IsID(id) {
			return errs.InvalidID("channel_id", "channel")
		}
		q.Inbox.ChannelID = id
	}
	for name, into := range map[string]*bool{"unanswered": &q.Inbox.Unanswered, "suggestion": &q.Inbox.SuggestionWaiting, "handed_over": &q.Inbox.HandedOver} {
		if v := c.QueryParam(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errs.InvalidRequest("%s must be true or false", name)
			}
			*into = b
		}
	}
	if a := c.QueryParam("assignee"); a != "" {
		// Only an operator's email can be assigned: anything else (a NUL
		// PostgreSQL cannot compare) is a bad value, not a filter.
		if err := conversation.CheckEmail("assignee", a); err != nil {
			return toHTTP(err)
		}
		q.Inbox.Assignee = a
	}
	page, err := h.app.ListInbox(c.Request().Context(), q)
	if err != nil {
		return toHTTP(err)
	}
	out := messagingapi.InboxPage{Conversations: make([]messagingapi.InboxConversation, len(page.Entries)), NextBefore: httpx.OptionalTimestamp(page.NextBefore)}
	for i, e := range page.Entries {
		out.Conversations[i] = messagingapi.InboxConversation{ConversationState: toAPIConversationState(e.ConversationState)}
		if e.LastMessage != nil {
			m := toAPIMessage(*e.LastMessage)
			out.Conversations[i].LastMessage = &m
		}
	}
	return c.JSON(http.StatusOK, out)
}

// GET /admin/conversations/:id/messages?workspace_id=W&before=&limit=
//
// Newest first, paged as GET /v1/conversations/:id/messages.
func (h *adminHandlers) listMessages(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	before, limit, err := pageParams(c)
	if err != nil {
		return err
	}
	page, err := h.app.ListMessages(c.Request().Context(), ws, c.Param("id"), before, limit)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.MessagePage{Messages: toAPIMessages(page.Messages), NextBefore: httpx.OptionalTimestamp(page.NextBefore)})
}

// POST /admin/conversations/:id/messages {workspace_id, operator?, message}
func (h *adminHandlers) sendOperatorMessage(c echo.Context) error {
	var req messagingapi.SendOperatorMessage
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	ws, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return err
	}
	m, err := h.app.SendOperatorMessage(c.Request().Context(), ws, c.Param("id"), req.Operator, fromAPIOutbound(req.Message))
	if err != nil {
		return chatFieldsHTTP("message.")(err)
	}
	return c.JSON(http.StatusCreated, messagingapi.MessageSent{Message: toAPIMessage(m)})
}
