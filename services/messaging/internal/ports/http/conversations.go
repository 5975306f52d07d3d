package http

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// The conversations' admin routes (docs/operations.md "Messaging and
// console routes"): their chat state, the built-in AI's sends and drafts,
// and the waiting suggestion an operator sends, edits or discards.

// ChatKeys hold the keys of the chat runs' sends and drafts (the body's
// key), in Redis under ChatKeyScope and, like the send routes' keys,
// backed by messaging.idempotency_receipts. Two stores for the two ways a
// response too large to keep names what it was: a send by its message_id,
// a draft by its run_id.
type ChatKeys struct {
	Messages    *idempotency.Store
	Suggestions *idempotency.Store
}

// ChatKeyScope is the Redis scope of the chat runs' keys.
const ChatKeyScope = "messaging.chat"

// RefRunID is the ref field of idempotency_response_unavailable on a
// draft.
const RefRunID = "run_id"

// chatKeyPrefix starts every chat run's key as the receipts keep it, so
// that it stays apart from the Idempotency-Keys a workspace sends with,
// which share that table.
const chatKeyPrefix = "chat:"

// workspaceID checks the workspace a conversation route names and returns
// it as ids are compared (lower case).
func workspaceID(ws string) (string, error) {
	if ws == "" {
		return "", errs.InvalidRequest("workspace_id is required")
	}
	if !channel.IsID(ws) {
		return "", errs.InvalidID("workspace_id", "workspace")
	}
	return strings.ToLower(ws), nil
}

// chatKey is the key a chat run's send or draft runs under: the run's
// key, in the workspace's chat key space. Its fingerprint is the route
// alone (method, and the path that names the conversation): a run that
// answers its turn again after its process died may word its messages
// otherwise, and must still get the first answer rather than send again.
func chatKey(c echo.Context, keys *idempotency.Store, ws, key string) (sendKey, error) {
	if key == "" {
		return sendKey{}, errs.InvalidRequest("key is required")
	}
	prefixed := chatKeyPrefix + key
	if idempotency.CheckKey(prefixed) != nil {
		return sendKey{}, errs.InvalidRequest("key must be at most %d printable ASCII characters", idempotency.MaxKeyLength-len(chatKeyPrefix))
	}
	return sendKey{
		keys: keys, workspaceID: ws, key: prefixed,
		fingerprint: idempotency.Fingerprint(c.Request().Method, c.Request().URL.Path, nil),
	}, nil
}

// chatFieldsHTTP is toHTTP for the chat routes, naming a broken rule's
// field as their bodies do: under prefix, a carousel's elements being its
// cards.
func chatFieldsHTTP(prefix string) func(error) error {
	return func(err error) error {
		var fe *conversation.FieldError
		if errors.As(err, &fe) {
			return errs.InvalidRequest("%s%s %s", prefix, strings.ReplaceAll(fe.Field, "elements", "cards"), fe.Reason)
		}
		return toHTTP(err)
	}
}

// GET /admin/conversations/:id?workspace_id=W
func (h *adminHandlers) getConversation(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	s, err := h.app.ConversationState(c.Request().Context(), ws, c.Param("id"))
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.ConversationStateAnswer{Conversation: toAPIConversationState(s)})
}

// changeConversation serves a route that changes a conversation's chat
// state: change gets the body (messagingapi.ChangeConversation), its
// workspace checked, and the route answers the conversation's new state.
func (h *adminHandlers) changeConversation(change func(ctx context.Context, ws, id string, req messagingapi.ChangeConversation) (app.ConversationState, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req messagingapi.ChangeConversation
		if err := httpx.BindJSON(c, &req); err != nil {
			return err
		}
		ws, err := workspaceID(req.WorkspaceID)
		if err != nil {
			return err
		}
		s, err := change(c.Request().Context(), ws, c.Param("id"), req)
		if err != nil {
			return toHTTP(err)
		}
		return c.JSON(http.StatusOK, messagingapi.ConversationStateAnswer{Conversation: toAPIConversationState(s)})
	}
}

func (h *adminHandlers) handOver(ctx context.Context, ws, id string, req messagingapi.ChangeConversation) (app.ConversationState, error) {
	return h.app.HandOver(ctx, ws, id, req.Reason)
}

func (h *adminHandlers) resumeAI(ctx context.Context, ws, id string, _ messagingapi.ChangeConversation) (app.ConversationState, error) {
	return h.app.ResumeAI(ctx, ws, id)
}

func (h *adminHandlers) addTags(ctx context.Context, ws, id string, req messagingapi.ChangeConversation) (app.ConversationState, error) {
	return h.app.AddTags(ctx, ws, id, req.Tags)
}

func (h *adminHandlers) assign(ctx context.Context, ws, id string, req messagingapi.ChangeConversation) (app.ConversationState, error) {
	if req.Assignee == nil {
		return app.ConversationState{}, &conversation.FieldError{Field: "assignee", Reason: `is required (an operator's email, or "" to unassign)`}
	}
	return h.app.AssignConversation(ctx, ws, id, *req.Assignee)
}

func (h *adminHandlers) markUnanswered(ctx context.Context, ws, id string, req messagingapi.ChangeConversation) (app.ConversationState, error) {
	return h.app.MarkUnanswered(ctx, ws, id, req.Reason)
}

// aiMessageAnswer is the answer of a chat run's send: 201 {"message": M}.
var aiMessageAnswer = sendAnswer[conversation.Message]{
	status: http.StatusCreated,
	json:   func(m conversation.Message) any { return messagingapi.AIMessageSent{Message: toAPIMessage(m)} },
	ref:    func(m conversation.Message) string { return m.ID },
	toHTTP: chatFieldsHTTP("message."),
}

// POST /admin/conversations/:id/ai-messages {workspace_id, key, run_id, message}
func (h *adminHandlers) sendAIMessage(c echo.Context) error {
	var req messagingapi.SendAIMessage
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	ws, k, err := h.chatRequest(c, h.chatKeys.Messages, req.WorkspaceID, req.Key, req.RunID)
	if err != nil {
		return err
	}
	o := fromAPIOutbound(req.Message)
	return serveSend(c, h.log, k, aiMessageAnswer,
		func(ctx context.Context, rr *app.ReceiptRequest[conversation.Message]) (conversation.Message, error) {
			return h.app.SendAIMessage(ctx, ws, c.Param("id"), req.RunID, o, rr)
		})
}

// chatRequest checks what a chat run's send or draft names: its workspace
// (returned as compared), its run and its key (returned as it runs
// under keys).
func (h *adminHandlers) chatRequest(c echo.Context, keys *idempotency.Store, ws, key, runID string) (string, sendKey, error) {
	ws, err := workspaceID(ws)
	if err != nil {
		return "", sendKey{}, err
	}
	if runID == "" {
		return "", sendKey{}, errs.InvalidRequest("run_id is required")
	}
	k, err := chatKey(c, keys, ws, key)
	return ws, k, err
}

// draftAnswer is the answer of a chat run's draft: 200 {"suggestion": S}.
var draftAnswer = sendAnswer[conversation.Suggestion]{
	status: http.StatusOK,
	json: func(s conversation.Suggestion) any {
		return messagingapi.SuggestionAnswer{Suggestion: toAPISuggestion(s)}
	},
	ref:    func(s conversation.Suggestion) string { return s.RunID },
	toHTTP: chatFieldsHTTP(""),
}

// PUT /admin/conversations/:id/suggestion {workspace_id, key, run_id, messages}
func (h *adminHandlers) draftSuggestion(c echo.Context) error {
	var req messagingapi.DraftSuggestion
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	ws, k, err := h.chatRequest(c, h.chatKeys.Suggestions, req.WorkspaceID, req.Key, req.RunID)
	if err != nil {
		return err
	}
	msgs := fromAPIOutbounds(req.Messages)
	return serveSend(c, h.log, k, draftAnswer,
		func(ctx context.Context, rr *app.ReceiptRequest[conversation.Suggestion]) (conversation.Suggestion, error) {
			return h.app.DraftSuggestion(ctx, ws, c.Param("id"), req.RunID, msgs, rr)
		})
}

// GET /admin/conversations/:id/suggestion?workspace_id=W
func (h *adminHandlers) getSuggestion(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	s, err := h.app.Suggestion(c.Request().Context(), ws, c.Param("id"))
	switch {
	case errors.Is(err, conversation.ErrNoSuggestion):
		return c.JSON(http.StatusOK, messagingapi.SuggestionAnswer{})
	case err != nil:
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.SuggestionAnswer{Suggestion: toAPISuggestion(s)})
}

// POST /admin/conversations/:id/suggestion/send {workspace_id, operator?, messages?}
func (h *adminHandlers) sendSuggestion(c echo.Context) error {
	var req messagingapi.SendSuggestion
	if err := httpx.BindJSON(c, &req); err != nil {
		return err
	}
	ws, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return err
	}
	var edited []conversation.Outbound
	if len(req.Messages) > 0 {
		edited = fromAPIOutbounds(req.Messages)
	}
	var seen *conversation.SuggestionMark
	if req.Seen != nil {
		if seen, err = suggestionMark("seen.", req.Seen.RunID, req.Seen.CreatedAt); err != nil {
			return err
		}
	}
	sent, err := h.app.SendSuggestion(c.Request().Context(), ws, c.Param("id"), req.Operator, seen, edited)
	if err != nil {
		return chatFieldsHTTP("")(err)
	}
	return c.JSON(http.StatusCreated, messagingapi.SuggestionSent{Messages: toAPIMessages(sent)})
}

// maxRunIDLength bounds a run_id named in a query: a chat run's id is a
// UUID, and a draft's is what the run gave.
const maxRunIDLength = 128

// suggestionMark reads the draft an operator read, as its suggestion's
// run_id and created_at (under prefix, for the refusal's words).
func suggestionMark(prefix, runID, createdAt string) (*conversation.SuggestionMark, error) {
	if runID == "" || len(runID) > maxRunIDLength || !utf8.ValidString(runID) || strings.ContainsRune(runID, 0) {
		return nil, errs.InvalidRequest("%srun_id must be the suggestion's run_id", prefix)
	}
	at, err := time.Parse(time.RFC3339Nano, createdAt)
	if err != nil {
		return nil, errs.InvalidRequest("%screated_at must be the suggestion's created_at (RFC 3339)", prefix)
	}
	return &conversation.SuggestionMark{RunID: runID, CreatedAt: at}, nil
}

// DELETE /admin/conversations/:id/suggestion?workspace_id=W[&run_id=R&created_at=T]
func (h *adminHandlers) discardSuggestion(c echo.Context) error {
	ws, err := workspaceID(c.QueryParam("workspace_id"))
	if err != nil {
		return err
	}
	var seen *conversation.SuggestionMark
	if runID, at := c.QueryParam("run_id"), c.QueryParam("created_at"); runID != "" || at != "" {
		if seen, err = suggestionMark("", runID, at); err != nil {
			return err
		}
	}
	s, err := h.app.DiscardSuggestion(c.Request().Context(), ws, c.Param("id"), seen)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.ConversationStateAnswer{Conversation: toAPIConversationState(s)})
}
