package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// POST /v1/messages
func (h *apiHandlers) sendMessage(c echo.Context) error {
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	var req messagingapi.SendMessage
	raw, err := decodeSend(c, &req, &req.ConversationID)
	if err != nil {
		return err
	}
	if req.Text == nil {
		return errs.InvalidRequest("text is required")
	}
	out := conversation.OutboundText{Text: *req.Text, QuickReplies: req.QuickReplies, Buttons: fromAPIButtons(req.Buttons)}
	return serveSend(c, h.log, h.sendKey(c, h.sendKeys.Messages, key, raw), messageAnswer,
		func(ctx context.Context, rr *app.ReceiptRequest[conversation.Message]) (conversation.Message, error) {
			return h.app.SendMessage(ctx, workspaceOf(c), req.ConversationID, conversation.ByAPI, out, rr)
		})
}

// messageAnswer is the answer of a send that stores one message:
// 201 {"message": M}.
var messageAnswer = sendAnswer[conversation.Message]{
	status: http.StatusCreated,
	json:   func(m conversation.Message) any { return messagingapi.MessageSent{Message: toAPIMessage(m)} },
	ref:    func(m conversation.Message) string { return m.ID },
	toHTTP: toHTTP,
}

// POST /v1/image: the image, then the text as a separate message. The
// answer's message is the image; messages lists every message sent.
func (h *apiHandlers) sendImage(c echo.Context) error {
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	var req messagingapi.SendImage
	raw, err := decodeSend(c, &req, &req.ConversationID)
	if err != nil {
		return err
	}
	out := conversation.OutboundImage{ImageURL: req.ImageURL, Text: req.Text}
	return serveSend(c, h.log, h.sendKey(c, h.sendKeys.Messages, key, raw), imageAnswer,
		func(ctx context.Context, rr *app.ReceiptRequest[[]conversation.Message]) ([]conversation.Message, error) {
			return h.app.SendImage(ctx, workspaceOf(c), req.ConversationID, out, rr)
		})
}

// imageAnswer is the answer of POST /v1/image: 201 {"message": the image,
// "messages": all}. When only the text failed, the image went out and is
// stored; the error says what did not.
var imageAnswer = sendAnswer[[]conversation.Message]{
	status: http.StatusCreated,
	json: func(msgs []conversation.Message) any {
		all := toAPIMessages(msgs)
		return messagingapi.ImageSent{Message: all[0], Messages: all}
	},
	ref: func(msgs []conversation.Message) string {
		if len(msgs) == 0 {
			return ""
		}
		return msgs[0].ID
	},
	toHTTP: toHTTP,
}

// POST /v1/carousel
func (h *apiHandlers) sendCarousel(c echo.Context) error {
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	var req messagingapi.SendCarousel
	raw, err := decodeSend(c, &req, &req.ConversationID)
	if err != nil {
		return err
	}
	out := conversation.OutboundCarousel{Ratio: req.Ratio, Elements: make([]conversation.Card, len(req.Elements))}
	for i, e := range req.Elements {
		out.Elements[i] = fromAPICard(e)
	}
	return serveSend(c, h.log, h.sendKey(c, h.sendKeys.Messages, key, raw), messageAnswer,
		func(ctx context.Context, rr *app.ReceiptRequest[conversation.Message]) (conversation.Message, error) {
			return h.app.SendCarousel(ctx, workspaceOf(c), req.ConversationID, conversation.ByAPI, out, rr)
		})
}

// POST /v1/typing
func (h *apiHandlers) sendTyping(c echo.Context) error {
	var req messagingapi.SendTyping
	if _, err := decodeSend(c, &req, &req.ConversationID); err != nil {
		return err
	}
	if err := h.app.SendTyping(c.Request().Context(), workspaceOf(c), req.ConversationID); err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, messagingapi.OK{OK: true})
}

// decodeSend reads a send's body into req and returns it raw, as the
// idempotency key's fingerprint takes it; conversationID points at req's
// conversation_id, which every send requires. A tag field is refused
// before anything else, whatever the rest holds (docs/sending.md "The
// 24-hour window, and tags").
func decodeSend(c echo.Context, req any, conversationID *string) ([]byte, error) {
	raw, err := readBody(c)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if _, ok := fields["tag"]; ok {
			return nil, errTagUnsupported
		}
	}
	if err := httpx.DecodeJSON(bytes.NewReader(raw), req); err != nil {
		return nil, err
	}
	if *conversationID == "" {
		return nil, errs.InvalidRequest("conversation_id is required")
	}
	return raw, nil
}

// readBody reads a /v1 body. The gateway holds the public API to its own
// limit; this one only backs it (httpx.MaxBodyBytes is at least as large).
func readBody(c echo.Context) ([]byte, error) {
	return httpx.ReadBody(c.Request().Body, httpx.MaxBodyBytes)
}
