package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// MaxCallbackData is the Bot API's limit on an inline button's
// callback_data, in bytes.
const MaxCallbackData = 64

// maxResponseBytes bounds what is read of a Bot API answer.
const maxResponseBytes = 1 << 20

// Client calls the Bot API at a base URL (https://api.telegram.org, or a
// fake in tests).
type Client struct {
	base string
	http *http.Client
}

var _ conversation.Transport = (*Client)(nil)

// NewClient returns a client for the Bot API at base. hc should have a
// timeout; the request context bounds each call too.
func NewClient(base string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), http: hc}
}

// sendMessageRequest is sendMessage's parameters.
type sendMessageRequest struct {
	ChatID      any          `json:"chat_id"`
	Text        string       `json:"text"`
	ReplyMarkup *replyMarkup `json:"reply_markup,omitempty"`
}

// replyMarkup is an InlineKeyboardMarkup or a ReplyKeyboardMarkup.
type replyMarkup struct {
	InlineKeyboard  [][]inlineButton `json:"inline_keyboard,omitempty"`
	Keyboard        [][]keyboardKey  `json:"keyboard,omitempty"`
	OneTimeKeyboard bool             `json:"one_time_keyboard,omitempty"`
	ResizeKeyboard  bool             `json:"resize_keyboard,omitempty"`
}

type inlineButton struct {
	Text         string `json:"text"`
	URL          string `json:"url,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
}

type keyboardKey struct {
	Text string `json:"text"`
}

// SendText sends o with sendMessage: buttons become an inline keyboard (one
// button per row; postback payloads as callback_data), quick replies a
// one-time reply keyboard.
func (c *Client) SendText(ctx context.Context, to conversation.Target, o conversation.OutboundText) (conversation.Sent, error) {
	markup, err := keyboard(o)
	if err != nil {
		return conversation.Sent{}, err
	}
	req := sendMessageRequest{ChatID: chatID(to.Conversation.ReplyTo), Text: o.Text, ReplyMarkup: markup}
	var msg Message
	if err := c.call(ctx, to.Channel.Token, "sendMessage", req, &msg); err != nil {
		return conversation.Sent{}, err
	}
	return conversation.Sent{ExternalID: strconv.FormatInt(msg.MessageID, 10)}, nil
}

// sendPhotoRequest is sendPhoto's parameters.
type sendPhotoRequest struct {
	ChatID      any          `json:"chat_id"`
	Photo       string       `json:"photo"`
	Caption     string       `json:"caption,omitempty"`
	ReplyMarkup *replyMarkup `json:"reply_markup,omitempty"`
}

// SendImage sends the image with sendPhoto; Telegram fetches the URL.
func (c *Client) SendImage(ctx context.Context, to conversation.Target, imageURL string) (conversation.Sent, error) {
	var msg Message
	req := sendPhotoRequest{ChatID: chatID(to.Conversation.ReplyTo), Photo: imageURL}
	if err := c.call(ctx, to.Channel.Token, "sendPhoto", req, &msg); err != nil {
		return conversation.Sent{}, err
	}
	return conversation.Sent{ExternalID: strconv.FormatInt(msg.MessageID, 10)}, nil
}

// SendCarousel sends each card as its own message, in order: a photo with
// the title and subtitle as caption (a text message when the card has no
// image), and the card's buttons as its inline keyboard. Telegram has no
// carousel; this is the closest a chat shows.
func (c *Client) SendCarousel(ctx context.Context, to conversation.Target, o conversation.OutboundCarousel) ([]conversation.Sent, error) {
	markups := make([]*replyMarkup, len(o.Elements))
	for i, card := range o.Elements {
		m, err := inlineKeyboard(card.Buttons, fmt.Sprintf("elements[%d].buttons", i))
		if err != nil {
			return nil, err
		}
		markups[i] = m
	}
	sent := make([]conversation.Sent, 0, len(o.Elements))
	for i, card := range o.Elements {
		caption := card.Title
		if card.Subtitle != "" {
			caption += "\n" + card.Subtitle
		}
		var msg Message
		var err error
		if card.ImageURL != "" {
			err = c.call(ctx, to.Channel.Token, "sendPhoto", sendPhotoRequest{
				ChatID: chatID(to.Conversation.ReplyTo), Photo: card.ImageURL, Caption: caption, ReplyMarkup: markups[i],
			}, &msg)
		} else {
			err = c.call(ctx, to.Channel.Token, "sendMessage", sendMessageRequest{
				ChatID: chatID(to.Conversation.ReplyTo), Text: caption, ReplyMarkup: markups[i],
			}, &msg)
		}
		if err != nil {
			if len(sent) > 0 {
				// The customer already has the first cards; say which.
				var pe *conversation.PlatformError
				if errors.As(err, &pe) {
					pe.Description = fmt.Sprintf("card %d of %d was refused after %d were delivered: %s", i+1, len(o.Elements), len(sent), pe.Description)
				}
				return nil, &conversation.PartlySentError{Sent: sent, Err: err}
			}
			return nil, err
		}
		sent = append(sent, conversation.Sent{ExternalID: strconv.FormatInt(msg.MessageID, 10)})
	}
	return sent, nil
}

// SendTyping shows "typing…" with sendChatAction.
func (c *Client) SendTyping(ctx context.Context, to conversation.Target) error {
	var ok bool
	req := map[string]any{"chat_id": chatID(to.Conversation.ReplyTo), "action": "typing"}
	return c.call(ctx, to.Channel.Token, "sendChatAction", req, &ok)
}

// answerCallbackQueryRequest is answerCallbackQuery's parameters; without
// text the customer sees no notification, only the button stop spinning.
type answerCallbackQueryRequest struct {
	CallbackQueryID string `json:"callback_query_id"`
}

// AnswerButton answers the callback query queryID with answerCallbackQuery:
// Telegram shows the tapped inline button as loading until it is answered
// (or about 15 seconds pass).
func (c *Client) AnswerButton(ctx context.Context, ch channel.Channel, queryID string) error {
	var ok bool
	return c.call(ctx, ch.Token, "answerCallbackQuery", answerCallbackQueryRequest{CallbackQueryID: queryID}, &ok)
}

// inlineKeyboard is buttons as an inline keyboard, one button per row:
// postback payloads as callback_data, web_url as url.
func inlineKeyboard(buttons []conversation.Button, field string) (*replyMarkup, error) {
	if len(buttons) == 0 {
		return nil, nil
	}
	rows := make([][]inlineButton, len(buttons))
	for i, b := range buttons {
		btn := inlineButton{Text: b.Title}
		switch b.Type {
		case conversation.ButtonTypeWebURL:
			btn.URL = b.URL
		case conversation.ButtonTypePostback:
			if len(b.Payload) > MaxCallbackData {
				return nil, &conversation.FieldError{
					Field:  fmt.Sprintf("%s[%d].payload", field, i),
					Reason: fmt.Sprintf("must be at most %d bytes on telegram (got %d)", MaxCallbackData, len(b.Payload)),
				}
			}
			btn.CallbackData = b.Payload
		}
		rows[i] = []inlineButton{btn}
	}
	return &replyMarkup{InlineKeyboard: rows}, nil
}

func keyboard(o conversation.OutboundText) (*replyMarkup, error) {
	switch {
	case len(o.Buttons) > 0:
		return inlineKeyboard(o.Buttons, "buttons")
	case len(o.QuickReplies) > 0:
		rows := make([][]keyboardKey, len(o.QuickReplies))
		for i, q := range o.QuickReplies {
			rows[i] = []keyboardKey{{Text: q}}
		}
		return &replyMarkup{Keyboard: rows, OneTimeKeyboard: true, ResizeKeyboard: true}, nil
	}
	return nil, nil
}

// chatID sends numeric chat ids as JSON numbers, as Telegram documents
// them, and anything else (@channelusername) as a string.
func chatID(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return s
}

// response is the Bot API envelope: {ok, result} or {ok:false, error_code,
// description}.
type response struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
}

func (c *Client) call(ctx context.Context, token, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/bot"+url.PathEscape(token)+"/"+method, bytes.NewReader(body))
	if err != nil {
		return platformError(0, "invalid bot api address")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return platformError(0, "telegram could not be reached: "+httpx.CallFailure(ctx, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return platformError(0, "telegram's answer could not be read: "+httpx.CallFailure(ctx, err))
	}
	var env response
	if err := json.Unmarshal(raw, &env); err != nil {
		return platformError(resp.StatusCode, fmt.Sprintf("telegram answered HTTP %d without a Bot API response", resp.StatusCode))
	}
	if !env.OK {
		desc := env.Description
		if desc == "" {
			desc = fmt.Sprintf("telegram refused the request (HTTP %d)", resp.StatusCode)
		}
		code := env.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return platformError(code, desc)
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return platformError(0, method+" result is not what the Bot API documents")
	}
	return nil
}

func platformError(code int, description string) *conversation.PlatformError {
	return &conversation.PlatformError{Platform: channel.KindTelegram, Code: code, Description: description}
}
