// Package telegram speaks the Telegram Bot API: it reads the Update objects
// Telegram posts to the ingress webhook and sends messages with the bot's
// token (https://core.telegram.org/bots/api).
package telegram

import (
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// SecretHeader carries the secret_token given to setWebhook on every update
// Telegram posts.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// UpdateKey names an update for ingress dedupe.
func UpdateKey(updateID int64) string {
	return "telegram:update:" + strconv.FormatInt(updateID, 10)
}

// Update is Telegram's Update object, with the fields Parley reads. Kinds of
// update Parley does not handle (edited_message, channel_post, ...) decode
// to an Update without Message or CallbackQuery.
type Update struct {
	// UpdateID is a pointer so that an Update without one can be refused.
	UpdateID      *int64         `json:"update_id"`
	Message       *Message       `json:"message,omitempty"`
	CallbackQuery *CallbackQuery `json:"callback_query,omitempty"`
}

// Message is Telegram's Message object. Under a callback query it may be an
// InaccessibleMessage (date 0, no content), which decodes to the same type.
type Message struct {
	MessageID   int64                 `json:"message_id"`
	From        *User                 `json:"from,omitempty"`
	Chat        Chat                  `json:"chat"`
	Date        int64                 `json:"date"`
	Text        string                `json:"text,omitempty"`
	ReplyMarkup *InlineKeyboardMarkup `json:"reply_markup,omitempty"`
}

// CallbackQuery is Telegram's CallbackQuery object: a customer tapped an
// inline keyboard button whose callback_data is Data.
type CallbackQuery struct {
	// ID names the query for answerCallbackQuery.
	ID   string `json:"id"`
	From *User  `json:"from,omitempty"`
	// Message is the bot's message the button was under; absent for
	// buttons of inline-mode messages (then InlineMessageID is set).
	Message         *Message `json:"message,omitempty"`
	InlineMessageID string   `json:"inline_message_id,omitempty"`
	ChatInstance    string   `json:"chat_instance,omitempty"`
	// Data is the button's callback_data; empty for game buttons.
	Data string `json:"data,omitempty"`
}

// InlineKeyboardMarkup is the inline keyboard a message carries.
type InlineKeyboardMarkup struct {
	InlineKeyboard [][]InlineKeyboardButton `json:"inline_keyboard"`
}

// InlineKeyboardButton is one button of an inline keyboard.
type InlineKeyboardButton struct {
	Text         string `json:"text"`
	URL          string `json:"url,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
}

// User is Telegram's User object.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// Chat is Telegram's Chat object.
type Chat struct {
	ID   int64  `json:"id"`
	Type string `json:"type"`
}

// Inbound returns the customer message the update carries, or false when it
// carries nothing Parley stores yet: updates other than a new message or a
// tapped button, messages without text (stickers, photos) or without a
// sender, and taps without callback_data (games). receivedAt stands in for a
// missing date, and is the time of a tap: a callback query has no date of
// its own (the date of the message under it is when the bot sent that).
func (u Update) Inbound(receivedAt time.Time) (conversation.Inbound, bool) {
	if u.CallbackQuery != nil {
		return u.CallbackQuery.inbound(receivedAt)
	}
	m := u.Message
	if m == nil || m.From == nil || m.Text == "" {
		return conversation.Inbound{}, false
	}
	sentAt := receivedAt
	if m.Date > 0 {
		sentAt = time.Unix(m.Date, 0).UTC()
	}
	return conversation.Inbound{
		SenderID:   strconv.FormatInt(m.From.ID, 10),
		SenderName: strings.TrimSpace(m.From.FirstName + " " + m.From.LastName),
		// Replies go to the chat the message came from: the private chat
		// with the customer, or the group they wrote in.
		ReplyTo:    strconv.FormatInt(m.Chat.ID, 10),
		Type:       conversation.TypeText,
		Text:       m.Text,
		ExternalID: strconv.FormatInt(m.MessageID, 10),
		SentAt:     sentAt,
	}, true
}

// inbound is the tap as a postback: the payload is the button's
// callback_data, the text the title of the button that carries it (the data
// itself when the message or its keyboard is no longer there), and the
// message's id on Telegram the query's id.
func (q *CallbackQuery) inbound(receivedAt time.Time) (conversation.Inbound, bool) {
	if q.From == nil || q.Data == "" || q.ID == "" {
		return conversation.Inbound{}, false
	}
	// Replies go to the chat of the message with the button; a button of
	// an inline-mode message has none, and the customer's private chat with
	// the bot is the only place left to answer.
	replyTo := q.From.ID
	if q.Message != nil && q.Message.Chat.ID != 0 {
		replyTo = q.Message.Chat.ID
	}
	return conversation.Inbound{
		SenderID:   strconv.FormatInt(q.From.ID, 10),
		SenderName: strings.TrimSpace(q.From.FirstName + " " + q.From.LastName),
		ReplyTo:    strconv.FormatInt(replyTo, 10),
		Type:       conversation.TypePostback,
		Text:       q.buttonTitle(),
		ExternalID: q.ID,
		SentAt:     receivedAt,
		Postback:   &conversation.Postback{Payload: q.Data},
	}, true
}

// buttonTitle is the text of the tapped button: the first button of the
// message's inline keyboard whose callback_data is the query's data.
func (q *CallbackQuery) buttonTitle() string {
	if q.Message != nil && q.Message.ReplyMarkup != nil {
		for _, row := range q.Message.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				if b.CallbackData == q.Data && b.Text != "" {
					return b.Text
				}
			}
		}
	}
	return q.Data
}
