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

func keyboard(o conversation.OutboundText) (*replyMarkup, error) {
	switch {
	case len(o.Buttons) > 0:
		rows := make([][]inlineButton, len(o.Buttons))
		for i, b := range o.Buttons {
			btn := inlineButton{Text: b.Title}
			switch b.Type {
			case conversation.ButtonTypeWebURL:
				btn.URL = b.URL
			case conversation.ButtonTypePostback:
				if len(b.Payload) > MaxCallbackData {
					return nil, &conversation.FieldError{
						Field:  fmt.Sprintf("buttons[%d].payload", i),
						Reason: fmt.Sprintf("must be at most %d bytes on telegram (got %d)", MaxCallbackData, len(b.Payload)),
					}
				}
				btn.CallbackData = b.Payload
			}
			rows[i] = []inlineButton{btn}
		}
		return &replyMarkup{InlineKeyboard: rows}, nil
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
		return platformError(0, "telegram could not be reached: "+transportReason(ctx, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return platformError(0, "telegram's answer could not be read: "+transportReason(ctx, err))
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

// transportReason describes a failed call without its URL, which carries
// the bot token.
func transportReason(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if uerr.Timeout() {
			return "no answer in time"
		}
		err = uerr.Err
	}
	return err.Error()
}
