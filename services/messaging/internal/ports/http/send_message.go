package http

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

type buttonJSON struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	URL     string `json:"url"`
	Payload string `json:"payload"`
}

type sendMessageRequest struct {
	ConversationID string       `json:"conversation_id"`
	Text           *string      `json:"text"`
	QuickReplies   []string     `json:"quick_replies"`
	Buttons        []buttonJSON `json:"buttons"`
}

// POST /v1/messages
func (h *Handlers) sendMessage(c echo.Context) error {
	raw, err := readBody(c)
	if err != nil {
		return err
	}
	// tag is refused whatever else the request holds (specification §1).
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if _, ok := fields["tag"]; ok {
			return errTagUnsupported
		}
	}
	var req sendMessageRequest
	if err := httpx.DecodeJSON(bytes.NewReader(raw), &req); err != nil {
		return err
	}
	if req.ConversationID == "" {
		return errs.InvalidRequest("conversation_id is required")
	}
	if req.Text == nil {
		return errs.InvalidRequest("text is required")
	}
	out := conversation.OutboundText{Text: *req.Text, QuickReplies: req.QuickReplies}
	for _, b := range req.Buttons {
		out.Buttons = append(out.Buttons, conversation.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload})
	}
	msg, err := h.app.SendMessage(c.Request().Context(), workspaceOf(c), req.ConversationID, out)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"message": toMessageJSON(msg)})
}

func readBody(c echo.Context) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, httpx.MaxBodyBytes+1))
	if err != nil {
		return nil, errs.InvalidRequest("request body could not be read")
	}
	if len(raw) > httpx.MaxBodyBytes {
		return nil, errs.New(http.StatusRequestEntityTooLarge, errs.CodeRequestTooLarge, "request body too large")
	}
	return raw, nil
}
