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
// to an Update without Message.
type Update struct {
	// UpdateID is a pointer so that an Update without one can be refused.
	UpdateID *int64   `json:"update_id"`
	Message  *Message `json:"message,omitempty"`
}

// Message is Telegram's Message object.
type Message struct {
	MessageID int64  `json:"message_id"`
	From      *User  `json:"from,omitempty"`
	Chat      Chat   `json:"chat"`
	Date      int64  `json:"date"`
	Text      string `json:"text,omitempty"`
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
// carries nothing Parley stores yet: updates other than a new message, and
// messages without text (stickers, photos) or without a sender. receivedAt
// stands in for a missing date.
func (u Update) Inbound(receivedAt time.Time) (conversation.Inbound, bool) {
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
