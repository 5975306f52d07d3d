package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// customerConversation makes a conversation the way a customer does: by
// writing to the channel's bot.
func (h *harness) customerConversation(ws string, ch messagingapi.AdminChannel, fromID int64) messagingapi.Conversation {
	h.t.Helper()
	h.deliver(ch, tgUpdate{UpdateID: fromID, MessageID: 1, FromID: fromID, First: "Cus", Last: "Tomer", Date: t0.Unix(), Text: "help"})
	for _, c := range h.conversations(ws, "").Conversations {
		if c.ChannelID == ch.ID && c.Contact.SenderID == jsonNumber(fromID) {
			return c
		}
	}
	h.t.Fatal("conversation not found")
	return messagingapi.Conversation{}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSendMessageToTelegram(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 31337)

	tests := []struct {
		name       string
		body       map[string]any
		wantMarkup any
		wantMeta   map[string]any
	}{
		{
			name:     "text",
			body:     map[string]any{"conversation_id": conv.ID, "text": "Hi! How can we help?"},
			wantMeta: map[string]any{},
		},
		{
			name: "buttons",
			body: map[string]any{"conversation_id": conv.ID, "text": "Pick one", "buttons": []map[string]any{
				{"type": "postback", "title": "Track order", "payload": "TRACK_ORDER"},
				{"type": "web_url", "title": "Open shop", "url": "https://shop.example.com/a?b=c"},
			}},
			wantMarkup: map[string]any{"inline_keyboard": []any{
				[]any{map[string]any{"text": "Track order", "callback_data": "TRACK_ORDER"}},
				[]any{map[string]any{"text": "Open shop", "url": "https://shop.example.com/a?b=c"}},
			}},
			wantMeta: map[string]any{"buttons": []any{
				map[string]any{"type": "postback", "title": "Track order", "payload": "TRACK_ORDER"},
				map[string]any{"type": "web_url", "title": "Open shop", "url": "https://shop.example.com/a?b=c"},
			}},
		},
		{
			name: "quick replies",
			body: map[string]any{"conversation_id": conv.ID, "text": "Size?", "quick_replies": []string{"Small", "Large"}, "buttons": []any{}},
			wantMarkup: map[string]any{
				"keyboard":          []any{[]any{map[string]any{"text": "Small"}}, []any{map[string]any{"text": "Large"}}},
				"one_time_keyboard": true,
				"resize_keyboard":   true,
			},
			wantMeta: map[string]any{"quick_replies": []any{"Small", "Large"}},
		},
		{
			name:     "longest text",
			body:     map[string]any{"conversation_id": conv.ID, "text": strings.Repeat("é", 4096), "quick_replies": nil},
			wantMeta: map[string]any{},
		},
	}
	for i, tt := range tests {
		before := time.Now().UTC().Add(-time.Second)
		var out messagingapi.MessageSent
		if err := h.api(ws, http.MethodPost, "/v1/messages", tt.body, &out); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		calls := h.tg.Calls()
		if len(calls) != i+1 {
			t.Fatalf("%s: telegram got %d calls, want %d", tt.name, len(calls), i+1)
		}
		call := calls[i]
		if call.Method != "sendMessage" || call.Token != h.botToken(ch.ID) {
			t.Fatalf("%s: call %s with token %q", tt.name, call.Method, call.Token)
		}
		if call.Params["chat_id"] != float64(31337) || call.Params["text"] != tt.body["text"] {
			t.Fatalf("%s: chat_id %v (%T), text %v", tt.name, call.Params["chat_id"], call.Params["chat_id"], call.Params["text"])
		}
		if got := call.Params["reply_markup"]; !reflect.DeepEqual(got, tt.wantMarkup) {
			t.Fatalf("%s: reply_markup = %#v, want %#v", tt.name, got, tt.wantMarkup)
		}
		m := out.Message
		if m.ConversationID != conv.ID || m.Sender != "user" || m.Type != "text" || m.Content != tt.body["text"] ||
			m.ExternalID != h.tg.LastMessageID() || !reflect.DeepEqual(m.Metadata, tt.wantMeta) {
			t.Fatalf("%s: message = %+v", tt.name, m)
		}
		created, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil || created.Before(before) || created.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s: created_at %q", tt.name, m.CreatedAt)
		}
		// The inbox shows it first, exactly as returned.
		latest := h.messages(ws, conv.ID, "?limit=1").Messages[0]
		if !reflect.DeepEqual(latest, m) {
			t.Fatalf("%s: stored %+v, returned %+v", tt.name, latest, m)
		}
		if c := h.conversations(ws, "").Conversations[0]; c.ID != conv.ID || c.LastMessageAt != m.CreatedAt {
			t.Fatalf("%s: conversation last_message_at %s, message %s", tt.name, c.LastMessageAt, m.CreatedAt)
		}
	}
	// Replies never become events, even on an external channel: the only
	// event written is the customer's message.
	if n := len(h.written()); n != 1 {
		t.Fatalf("events written = %d, want 1", n)
	}
	if n := h.count("messages", "sender = 'user'"); n != int64(len(tests)) {
		t.Fatalf("stored user messages = %d", n)
	}
}

func TestSendMessageErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	conv := h.customerConversation(ws, ch, 4040)
	id := conv.ID
	btn := func(fields string) string {
		return `{"conversation_id":"` + id + `","text":"t","buttons":[` + fields + `]}`
	}
	qrs := func(n int) string {
		q := make([]string, n)
		for i := range q {
			q[i] = `"q"`
		}
		return `{"conversation_id":"` + id + `","text":"t","quick_replies":[` + strings.Join(q, ",") + `]}`
	}
	postback := `{"type":"postback","title":"T","payload":"P"}`

	tests := []struct {
		name, body  string
		status      int
		code, field string
	}{
		{"tag", `{"conversation_id":"` + id + `","text":"hi","tag":"ACCOUNT_UPDATE"}`, 400, "tag_unsupported", "tag"},
		{"tag before anything else", `{"tag":null,"buttons":[1,2,3,4]}`, 400, "tag_unsupported", "tag"},
		{"tag on unknown conversation", `{"conversation_id":"` + uuid.NewString() + `","text":"hi","tag":""}`, 400, "tag_unsupported", "tag"},
		{"malformed json", `{"conversation_id":`, 400, "invalid_request", "JSON"},
		{"empty body", ``, 400, "invalid_request", "JSON"},
		{"not an object", `"hello"`, 400, "invalid_request", "JSON object"},
		{"missing conversation_id", `{"text":"hi"}`, 400, "invalid_request", "conversation_id"},
		{"conversation_id not a string", `{"conversation_id":5,"text":"hi"}`, 400, "invalid_request", "conversation_id"},
		{"missing text", `{"conversation_id":"` + id + `"}`, 400, "invalid_request", "text"},
		{"null text", `{"conversation_id":"` + id + `","text":null}`, 400, "invalid_request", "text"},
		{"empty text", `{"conversation_id":"` + id + `","text":""}`, 400, "invalid_request", "text"},
		{"blank text", `{"conversation_id":"` + id + `","text":"  \n"}`, 400, "invalid_request", "text"},
		{"text not a string", `{"conversation_id":"` + id + `","text":42}`, 400, "invalid_request", "text"},
		{"text too long", `{"conversation_id":"` + id + `","text":"` + strings.Repeat("a", 4097) + `"}`, 400, "invalid_request", "text"},
		{"quick replies with buttons", `{"conversation_id":"` + id + `","text":"t","quick_replies":["a"],"buttons":[` + postback + `]}`, 400, "invalid_request", "quick_replies"},
		{"four buttons", btn(strings.Repeat(postback+",", 3) + postback), 400, "invalid_request", "buttons"},
		{"button without title", btn(`{"type":"postback","payload":"P"}`), 400, "invalid_request", "buttons[0].title"},
		{"button without type", btn(`{"title":"T","payload":"P"}`), 400, "invalid_request", "buttons[0].type"},
		{"button of unknown type", btn(postback + `,{"type":"phone_number","title":"T","payload":"+1"}`), 400, "invalid_request", "buttons[1].type"},
		{"web_url without url", btn(`{"type":"web_url","title":"T"}`), 400, "invalid_request", "buttons[0].url"},
		{"web_url over http", btn(`{"type":"web_url","title":"T","url":"http://example.com"}`), 400, "invalid_request", "buttons[0].url"},
		{"web_url not a url", btn(`{"type":"web_url","title":"T","url":"https:///nohost"}`), 400, "invalid_request", "buttons[0].url"},
		{"postback without payload", btn(`{"type":"postback","title":"T"}`), 400, "invalid_request", "buttons[0].payload"},
		{"postback payload over telegram's 64 bytes", btn(`{"type":"postback","title":"T","payload":"` + strings.Repeat("p", 65) + `"}`), 400, "invalid_request", "buttons[0].payload"},
		{"buttons not an array", `{"conversation_id":"` + id + `","text":"t","buttons":{}}`, 400, "invalid_request", "buttons"},
		{"fourteen quick replies", qrs(14), 400, "invalid_request", "quick_replies"},
		{"long quick reply", `{"conversation_id":"` + id + `","text":"t","quick_replies":["` + strings.Repeat("x", 21) + `"]}`, 400, "invalid_request", "quick_replies[0]"},
		{"empty quick reply", `{"conversation_id":"` + id + `","text":"t","quick_replies":["ok",""]}`, 400, "invalid_request", "quick_replies[1]"},
		{"NUL in the text", `{"conversation_id":"` + id + `","text":"a\u0000b"}`, 400, "invalid_request", "NUL character"},
		{"NUL in a quick reply", `{"conversation_id":"` + id + `","text":"t","quick_replies":["\\\u0000"]}`, 400, "invalid_request", "NUL character"},
		{"unknown conversation", `{"conversation_id":"` + uuid.NewString() + `","text":"hi"}`, 404, "conversation_not_found", ""},
		{"conversation id not an id", `{"conversation_id":"c_123","text":"hi"}`, 404, "conversation_not_found", ""},
	}
	for _, tt := range tests {
		status, body := h.apiRaw(ws, http.MethodPost, "/v1/messages", tt.body)
		code, msg := errorBody(t, body)
		if status != tt.status || code != tt.code || !strings.Contains(msg, tt.field) {
			t.Errorf("%s: %d %s %q, want %d %s naming %q", tt.name, status, code, msg, tt.status, tt.code, tt.field)
		}
	}
	// Exactly at the limits is fine, and so is the text \u0000 (an escaped
	// backslash, then u0000), which holds no NUL.
	if status, body := h.apiRaw(ws, http.MethodPost, "/v1/messages", `{"conversation_id":"`+id+`","text":"\\u0000"}`); status != 201 {
		t.Fatalf("the text \\u0000: %d %s", status, body)
	}
	if status, body := h.apiRaw(ws, http.MethodPost, "/v1/messages", qrs(13)); status != 201 {
		t.Fatalf("13 quick replies: %d %s", status, body)
	}
	if status, body := h.apiRaw(ws, http.MethodPost, "/v1/messages", btn(postback+","+postback+","+postback)); status != 201 {
		t.Fatalf("3 buttons: %d %s", status, body)
	}
	// The text under an image is optional, but one of only whitespace is
	// refused before the image goes out, as a blank text is above: the
	// customer never gets the image without the text meant to follow it.
	status, body := h.apiRaw(ws, http.MethodPost, "/v1/image", `{"conversation_id":"`+id+`","image_url":"https://cdn.shop.example/a.jpg","text":" \n\t"}`)
	if code, msg := errorBody(t, body); status != 400 || code != "invalid_request" || !strings.Contains(msg, "text") {
		t.Errorf("image with a blank text: %d %s %q, want 400 invalid_request naming text", status, code, msg)
	}
	if n := len(h.tg.Calls()); n != 3 {
		t.Fatalf("telegram got %d calls; refused requests must send nothing", n)
	}
	if n := h.count("messages", "sender = 'user'"); n != 3 {
		t.Fatalf("stored user messages = %d, want 2", n)
	}
}

func TestSendMessagePlatformErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	conv := h.customerConversation(ws, ch, 5050)
	body := map[string]any{"conversation_id": conv.ID, "text": "are you there?"}

	tests := []struct {
		name    string
		fail    telegramfake.Failure
		message string
	}{
		{"chat not found", telegramfake.Failure{Status: 400, Body: `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`}, "telegram: Bad Request: chat not found"},
		{"blocked", telegramfake.Failure{Status: 403, Body: `{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`}, "Forbidden: bot was blocked by the user"},
		{"rate limited", telegramfake.Failure{Status: 429, Body: `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`}, "Too Many Requests: retry after 5"},
		{"not the bot api", telegramfake.Failure{Status: 502, Body: `<html>Bad Gateway</html>`}, "HTTP 502"},
		{"unreachable", telegramfake.Failure{Drop: true}, "could not be reached"},
	}
	for _, tt := range tests {
		h.tg.SetFailure(&tt.fail)
		err := h.api(ws, http.MethodPost, "/v1/messages", body, nil)
		wantErr(t, err, http.StatusBadGateway, "platform_error", tt.message)
		if strings.Contains(err.Error(), h.botToken(ch.ID)) {
			t.Fatalf("%s: the error leaks the bot token: %v", tt.name, err)
		}
	}
	if n := h.count("messages", "sender = 'user'"); n != 0 {
		t.Fatalf("stored %d messages that were not sent", n)
	}
	h.tg.SetFailure(nil)
	if err := h.api(ws, http.MethodPost, "/v1/messages", body, nil); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestSendMessageToWebchatConversationWithoutVisitor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	var web messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "webchat"}, &web); err != nil {
		t.Fatal(err)
	}
	// Every platform has a transport now; a webchat conversation whose
	// reply_to is not a visitor id (webchat ingress never stores one) has
	// nowhere to be pushed: refused, nothing stored.
	contact, conv := uuid.NewString(), uuid.NewString()
	h.db.Exec(`INSERT INTO messaging.contacts (id, workspace_id, channel_id, sender_id, name) VALUES (?, ?, ?, 'visitor-1', 'Visitor')`, contact, ws, web.Channel.ID)
	h.db.Exec(`INSERT INTO messaging.conversations (id, workspace_id, channel_id, contact_id, platform, reply_to, last_message_at) VALUES (?, ?, ?, ?, 'webchat', 'visitor-1', now())`, conv, ws, web.Channel.ID, contact)

	err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv, "text": "hello"}, nil)
	wantErr(t, err, http.StatusBadGateway, "platform_error", "no webchat visitor")
	if n := h.count("messages", ""); n != 0 {
		t.Fatalf("stored %d messages", n)
	}
}

// TestTelegramCarouselIsOneMessagePerCard: Telegram has no carousel, so
// each card goes as its own message, in order: sendPhoto with the title
// and subtitle as caption and the card's buttons as its inline keyboard,
// sendMessage for a card without image. The one stored carousel message
// has the first one's id as external_id and all of them in
// metadata.external_ids (docs/sending.md "Each platform").
func TestTelegramCarouselIsOneMessagePerCard(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 4242)
	before := len(h.tg.Calls())

	var out messagingapi.MessageSent
	if err := h.api(ws, http.MethodPost, "/v1/carousel", map[string]any{
		"conversation_id": conv.ID,
		"elements": []map[string]any{
			{"title": "Blue mug", "subtitle": "12 USD", "image_url": "https://cdn.shop.example/blue.jpg",
				"buttons": []map[string]any{{"type": "postback", "title": "Buy", "payload": "BUY_BLUE"}}},
			{"title": "Red mug", "image_url": "https://cdn.shop.example/red.jpg",
				"buttons": []map[string]any{{"type": "web_url", "title": "See it", "url": "https://shop.example/red"}}},
			{"title": "Gift card", "subtitle": "Any amount"},
		},
	}, &out); err != nil {
		t.Fatal(err)
	}
	calls := h.tg.Calls()[before:]
	type sent struct {
		method, photo, text string
		markup              any
	}
	want := []sent{
		{"sendPhoto", "https://cdn.shop.example/blue.jpg", "Blue mug\n12 USD",
			map[string]any{"inline_keyboard": []any{[]any{map[string]any{"text": "Buy", "callback_data": "BUY_BLUE"}}}}},
		{"sendPhoto", "https://cdn.shop.example/red.jpg", "Red mug",
			map[string]any{"inline_keyboard": []any{[]any{map[string]any{"text": "See it", "url": "https://shop.example/red"}}}}},
		{"sendMessage", "", "Gift card\nAny amount", nil},
	}
	if len(calls) != len(want) {
		t.Fatalf("telegram got %d calls, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		text := c.Params["caption"]
		if c.Method == "sendMessage" {
			text = c.Params["text"]
		}
		photo, _ := c.Params["photo"].(string)
		if c.Method != want[i].method || photo != want[i].photo || text != want[i].text ||
			c.Params["chat_id"] != float64(4242) || !reflect.DeepEqual(c.Params["reply_markup"], want[i].markup) {
			t.Fatalf("card %d: %s %v, want %+v", i, c.Method, c.Params, want[i])
		}
	}
	// The fake numbers its messages one by one: the cards are the last
	// three.
	last, _ := strconv.Atoi(h.tg.LastMessageID())
	ids := []any{strconv.Itoa(last - 2), strconv.Itoa(last - 1), strconv.Itoa(last)}
	m := out.Message
	if m.Type != "carousel" || m.Sender != "user" || m.ExternalID != ids[0] ||
		!reflect.DeepEqual(m.Metadata["external_ids"], ids) || m.Metadata["ratio"] != "horizontal" {
		t.Fatalf("message = %+v, want a carousel with external_id %s and external_ids %v", m, ids[0], ids)
	}
	if elements, _ := m.Metadata["elements"].([]any); len(elements) != 3 {
		t.Fatalf("metadata.elements = %v", m.Metadata["elements"])
	}
	if n := h.count("messages", "sender = 'user'"); n != 1 {
		t.Fatalf("stored user messages = %d, want the one carousel", n)
	}
	if stored := h.messages(ws, conv.ID, "?limit=1").Messages[0]; !reflect.DeepEqual(stored, m) {
		t.Fatalf("stored %+v, returned %+v", stored, m)
	}
}
