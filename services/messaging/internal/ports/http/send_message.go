package http

import (
	"bytes"
	"encoding/json"
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

type imageRequest struct {
	ConversationID string `json:"conversation_id"`
	ImageURL       string `json:"image_url"`
	Text           string `json:"text"`
}

type cardJSON struct {
	Title    string       `json:"title"`
	Subtitle string       `json:"subtitle"`
	ImageURL string       `json:"image_url"`
	Buttons  []buttonJSON `json:"buttons"`
}

type carouselRequest struct {
	ConversationID string     `json:"conversation_id"`
	Elements       []cardJSON `json:"elements"`
	Ratio          string     `json:"ratio"`
}

type typingRequest struct {
	ConversationID string `json:"conversation_id"`
}

// POST /v1/messages
func (h *Handlers) sendMessage(c echo.Context) error {
	var req sendMessageRequest
	if err := decodeSend(c, &req); err != nil {
		return err
	}
	if req.Text == nil {
		return errs.InvalidRequest("text is required")
	}
	out := conversation.OutboundText{Text: *req.Text, QuickReplies: req.QuickReplies, Buttons: toButtons(req.Buttons)}
	msg, err := h.app.SendMessage(c.Request().Context(), workspaceOf(c), req.ConversationID, out)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"message": toMessageJSON(msg)})
}

// POST /v1/image: the image, then the text as a separate message. The
// answer's message is the image; messages lists every message sent.
func (h *Handlers) sendImage(c echo.Context) error {
	var req imageRequest
	if err := decodeSend(c, &req); err != nil {
		return err
	}
	msgs, err := h.app.SendImage(c.Request().Context(), workspaceOf(c), req.ConversationID,
		conversation.OutboundImage{ImageURL: req.ImageURL, Text: req.Text})
	if err != nil {
		// When only the text failed, the image went out and is stored; the
		// error says what did not.
		return toHTTP(err)
	}
	all := make([]messageJSON, len(msgs))
	for i, m := range msgs {
		all[i] = toMessageJSON(m)
	}
	return c.JSON(http.StatusCreated, map[string]any{"message": all[0], "messages": all})
}

// POST /v1/carousel
func (h *Handlers) sendCarousel(c echo.Context) error {
	var req carouselRequest
	if err := decodeSend(c, &req); err != nil {
		return err
	}
	out := conversation.OutboundCarousel{Ratio: req.Ratio, Elements: make([]conversation.Card, len(req.Elements))}
	for i, e := range req.Elements {
		out.Elements[i] = conversation.Card{Title: e.Title, Subtitle: e.Subtitle, ImageURL: e.ImageURL, Buttons: toButtons(e.Buttons)}
	}
	msg, err := h.app.SendCarousel(c.Request().Context(), workspaceOf(c), req.ConversationID, out)
	if err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"message": toMessageJSON(msg)})
}

// POST /v1/typing
func (h *Handlers) sendTyping(c echo.Context) error {
	var req typingRequest
	if err := decodeSend(c, &req); err != nil {
		return err
	}
	if err := h.app.SendTyping(c.Request().Context(), workspaceOf(c), req.ConversationID); err != nil {
		return toHTTP(err)
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// sendRequest is the body of a send: every one names its conversation.
type sendRequest interface{ conversation() string }

func (r *sendMessageRequest) conversation() string { return r.ConversationID }
func (r *imageRequest) conversation() string       { return r.ConversationID }
func (r *carouselRequest) conversation() string    { return r.ConversationID }
func (r *typingRequest) conversation() string      { return r.ConversationID }

// decodeSend reads a send's body into req. A tag field is refused before
// anything else, whatever the rest holds (specification §1).
func decodeSend(c echo.Context, req sendRequest) error {
	raw, err := readBody(c)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if _, ok := fields["tag"]; ok {
			return errTagUnsupported
		}
	}
	if err := httpx.DecodeJSON(bytes.NewReader(raw), req); err != nil {
		return err
	}
	if req.conversation() == "" {
		return errs.InvalidRequest("conversation_id is required")
	}
	return nil
}

func toButtons(in []buttonJSON) []conversation.Button {
	var out []conversation.Button
	for _, b := range in {
		out = append(out, conversation.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload})
	}
	return out
}

// readBody reads a /v1 body. The gateway holds the public API to its own
// limit; this one only backs it (httpx.MaxBodyBytes is at least as large).
func readBody(c echo.Context) ([]byte, error) {
	return httpx.ReadBody(c.Request().Body, httpx.MaxBodyBytes)
}
