package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

var t0 = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

func errorBody(t *testing.T, body []byte) (code, message string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Code, e.Message
}

func TestTelegramIngressStoresContactConversationAndMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")

	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 71, FromID: 424242, First: "Ada", Last: "Lovelace", Date: t0.Unix(), Text: "Hello there"})

	convs := h.conversations(ws, "")
	if len(convs.Conversations) != 1 || convs.NextBefore != nil {
		t.Fatalf("conversations = %+v", convs)
	}
	c := convs.Conversations[0]
	if c.Platform != "telegram" || c.ChannelID != ch.ID || c.LastMessageAt != "2026-01-15T10:00:00Z" {
		t.Fatalf("conversation = %+v", c)
	}
	if c.Contact.SenderID != "424242" || c.Contact.Name != "Ada Lovelace" || c.Contact.ProfilePic != "" || c.Contact.ID == "" {
		t.Fatalf("contact = %+v", c.Contact)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.CreatedAt); err != nil {
		t.Fatalf("created_at %q: %v", c.CreatedAt, err)
	}
	var replyTo string
	var lastCustomer time.Time
	h.db.Raw(`SELECT reply_to, last_customer_message_at FROM messaging.conversations WHERE id = ?`, c.ID).Row().Scan(&replyTo, &lastCustomer)
	if replyTo != "424242" || !lastCustomer.Equal(t0) {
		t.Fatalf("reply_to = %q, last_customer_message_at = %v", replyTo, lastCustomer)
	}

	msgs := h.messages(ws, c.ID, "")
	if len(msgs.Messages) != 1 || msgs.NextBefore != nil {
		t.Fatalf("messages = %+v", msgs)
	}
	m := msgs.Messages[0]
	if m.ConversationID != c.ID || m.Sender != "contact" || m.Type != "text" || m.Content != "Hello there" ||
		m.ExternalID != "71" || m.CreatedAt != "2026-01-15T10:00:00Z" || m.Metadata == nil || m.ID == "" {
		t.Fatalf("message = %+v", m)
	}

	// The same customer again: same contact and conversation, which moves
	// forward; a first name alone makes the name.
	h.deliver(ch, tgUpdate{UpdateID: 2, MessageID: 72, FromID: 424242, First: "Ada", Date: t0.Unix() + 60, Text: "Anyone?"})
	convs = h.conversations(ws, "")
	if len(convs.Conversations) != 1 || convs.Conversations[0].ID != c.ID || convs.Conversations[0].LastMessageAt != "2026-01-15T10:01:00Z" ||
		convs.Conversations[0].Contact.Name != "Ada" || convs.Conversations[0].Contact.ID != c.Contact.ID {
		t.Fatalf("after second message: %+v", convs)
	}
	msgs = h.messages(ws, c.ID, "")
	if len(msgs.Messages) != 2 || msgs.Messages[0].Content != "Anyone?" || msgs.Messages[1].Content != "Hello there" {
		t.Fatalf("messages = %+v", msgs)
	}
	if n := h.count("contacts", ""); n != 1 {
		t.Fatalf("contacts = %d", n)
	}
	// auto mode: the inbox fills, nothing is forwarded; the built-in AI
	// answers each message.
	if n := h.eventRows(); n != 0 {
		t.Fatalf("events = %d for an auto channel", n)
	}
	if n := h.turnRows(); n != 2 {
		t.Fatalf("chat turns = %d for an auto channel's 2 messages", n)
	}
}

// A NUL character in a customer's text (docs/channels.md "What Parley keeps
// of a customer's text"), which PostgreSQL cannot store, is stored as
// U+FFFD and the update is accepted: refused, Telegram would redeliver it
// forever and the message would never be stored.
func TestTelegramIngressKeepsATextWithANUL(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")

	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 71, FromID: 424243, First: "A\x00da", Date: t0.Unix(), Text: "hi\x00there"})

	convs := h.conversations(ws, "")
	if len(convs.Conversations) != 1 || convs.Conversations[0].Contact.Name != "A\ufffdda" {
		t.Fatalf("conversations = %+v", convs)
	}
	msgs := h.messages(ws, convs.Conversations[0].ID, "")
	if len(msgs.Messages) != 1 || msgs.Messages[0].Content != "hi\ufffdthere" {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestTelegramIngressRefusesWrongSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.telegramChannel(uuid.NewString(), "external")
	body := tgUpdate{UpdateID: 9, MessageID: 1, FromID: 7, First: "Eve", Date: t0.Unix(), Text: "let me in"}.JSON()

	for name, secret := range map[string]string{"missing": "", "wrong": ch.Secret + "x", "other": "0123456789abcdef"} {
		rec := h.postUpdate(ch.ID, secret, body)
		if code, _ := errorBody(t, rec.Body.Bytes()); rec.Code != http.StatusUnauthorized || code != "unauthorized" {
			t.Fatalf("%s secret: %d %s", name, rec.Code, rec.Body)
		}
	}
	for _, table := range []string{"ingress_receipts", "contacts", "conversations", "messages"} {
		if n := h.count(table, ""); n != 0 {
			t.Fatalf("%s has %d rows after refused updates", table, n)
		}
	}
	if n := len(h.written()); n != 0 {
		t.Fatalf("%d events written after refused updates", n)
	}
	// The real secret still works for the same update: nothing was claimed.
	if rec := h.postUpdate(ch.ID, ch.Secret, body); rec.Code != http.StatusOK {
		t.Fatalf("right secret: %d %s", rec.Code, rec.Body)
	}
	if n := h.count("messages", ""); n != 1 {
		t.Fatalf("messages = %d", n)
	}
}

func TestTelegramIngressRejections(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	var web messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "webchat"}, &web); err != nil {
		t.Fatal(err)
	}
	good := tgUpdate{UpdateID: 1, MessageID: 1, FromID: 7, First: "Bob", Date: t0.Unix(), Text: "hi"}.JSON()

	tests := []struct {
		name, channel, secret, body string
		status                      int
		code                        string
	}{
		{"unknown channel", uuid.NewString(), ch.Secret, good, 404, "channel_not_found"},
		{"not an id", "nope", ch.Secret, good, 404, "channel_not_found"},
		{"not a telegram channel", web.Channel.ID, web.Channel.Secret, good, 404, "channel_not_found"},
		{"malformed json", ch.ID, ch.Secret, `{"update_id": 1, "message": {`, 400, "invalid_request"},
		{"not an object", ch.ID, ch.Secret, `[1,2]`, 400, "invalid_request"},
		{"wrong type", ch.ID, ch.Secret, `{"update_id": "one"}`, 400, "invalid_request"},
		{"no update_id", ch.ID, ch.Secret, `{"message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "date": 1, "text": "x"}}`, 400, "invalid_request"},
	}
	for _, tt := range tests {
		rec := h.postUpdate(tt.channel, tt.secret, tt.body)
		code, _ := errorBody(t, rec.Body.Bytes())
		if rec.Code != tt.status || code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, rec.Code, rec.Body, tt.status, tt.code)
		}
	}
	if n := h.count("ingress_receipts", ""); n != 0 {
		t.Fatalf("ingress_receipts = %d", n)
	}
}

func TestTelegramIngressDedupesUpdateID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	u := tgUpdate{UpdateID: 777, MessageID: 5, FromID: 99, First: "Ann", Date: t0.Unix(), Text: "once"}

	for i := 0; i < 3; i++ {
		h.deliver(ch, u)
	}
	// A redelivery with other content is still the same update.
	u.Text = "twice?"
	h.deliver(ch, u)

	if n := h.count("messages", ""); n != 1 {
		t.Fatalf("messages = %d, want 1", n)
	}
	if n := len(h.written()); n != 1 {
		t.Fatalf("events written = %d, want 1", n)
	}
	if n := h.count("ingress_receipts", "channel_id = ? AND key = 'telegram:update:777'", ch.ID); n != 1 {
		t.Fatalf("ingress_receipts = %d", n)
	}
	// update_id is per bot: another channel's update 777 is its own.
	other := h.telegramChannel(ws, "auto")
	h.deliver(other, u)
	if n := h.count("messages", ""); n != 2 {
		t.Fatalf("messages = %d, want 2", n)
	}
}

func TestTelegramIngressIgnoresUnhandledUpdatesButDedupes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.telegramChannel(uuid.NewString(), "external")
	updates := []string{
		`{"update_id": 10, "edited_message": {"message_id": 1, "from": {"id": 5, "is_bot": false, "first_name": "A"}, "chat": {"id": 5, "type": "private"}, "date": 1700000000, "edit_date": 1700000100, "text": "edited"}}`,
		`{"update_id": 11, "channel_post": {"message_id": 2, "sender_chat": {"id": -100123, "type": "channel", "title": "News"}, "chat": {"id": -100123, "type": "channel", "title": "News"}, "date": 1700000000, "text": "post"}}`,
		`{"update_id": 12, "message": {"message_id": 3, "from": {"id": 5, "is_bot": false, "first_name": "A"}, "chat": {"id": 5, "type": "private"}, "date": 1700000000, "sticker": {"file_id": "CAACAgIAAxk", "file_unique_id": "AgADAQAD", "type": "regular", "width": 512, "height": 512, "is_animated": false, "is_video": false}}}`,
		`{"update_id": 13, "my_chat_member": {"chat": {"id": 5, "type": "private"}, "from": {"id": 5, "is_bot": false, "first_name": "A"}, "date": 1700000000, "old_chat_member": {"status": "member", "user": {"id": 1, "is_bot": true, "first_name": "Bot"}}, "new_chat_member": {"status": "kicked", "until_date": 0, "user": {"id": 1, "is_bot": true, "first_name": "Bot"}}}}`,
	}
	for _, u := range updates {
		for i := 0; i < 2; i++ {
			if rec := h.postUpdate(ch.ID, ch.Secret, u); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
				t.Fatalf("update %s: %d %q", u[:20], rec.Code, rec.Body)
			}
		}
	}
	for _, table := range []string{"contacts", "conversations", "messages"} {
		if n := h.count(table, ""); n != 0 {
			t.Fatalf("%s has %d rows after unhandled updates", table, n)
		}
	}
	if n := len(h.written()); n != 0 {
		t.Fatalf("%d events written after unhandled updates", n)
	}
	if n := h.count("ingress_receipts", "channel_id = ?", ch.ID); n != int64(len(updates)) {
		t.Fatalf("telegram_updates = %d, want %d", n, len(updates))
	}
}
