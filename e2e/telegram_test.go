package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// tgShop is a workspace with one Telegram channel in external mode, a saved
// webhook, and the fake Bot API behind the channel.
type tgShop struct {
	s        *suite
	bot      *telegramfake.Server
	rcv      *receiver.Receiver
	key      string
	ws       string
	secret   string // the webhook's signing secret
	channel  ctlChannel
	botToken string
}

func newTgShop(t *testing.T) *tgShop {
	t.Helper()
	bot, botAPI := telegramfake.Start(t)
	s := startSuite(t, "TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	shop := &tgShop{s: s, bot: bot, botToken: "700100200:AAH-telegram-e2e-token"}

	// A generous rate limit (developer's): this suite makes many calls in
	// a minute.
	shop.ws, shop.key = s.developer(t)
	shop.channel = s.addChannel(t, shop.ws, "external", "--kind", "telegram", "--token", shop.botToken)
	shop.rcv = newReceiver(t)
	shop.secret = s.saveWebhook(t, shop.key, shop.rcv.URL)
	return shop
}

// update posts a Telegram Update to the channel's ingress as Telegram does.
func (sh *tgShop) update(t *testing.T, body string) {
	t.Helper()
	postUpdate(t, sh.s.messagingURL+"/ingress/telegram/"+sh.channel.ID, sh.channel.Secret, body)
}

// customerWrites posts a private-chat text message from customer from.
func (sh *tgShop) customerWrites(t *testing.T, updateID, from int64, first string, date time.Time, text string) {
	t.Helper()
	sh.update(t, fmt.Sprintf(`{"update_id": %d, "message": {"message_id": %d, "date": %d,
		"from": {"id": %d, "is_bot": false, "first_name": %q, "language_code": "en"},
		"chat": {"id": %d, "first_name": %q, "type": "private"}, "text": %q}}`,
		updateID, updateID, date.Unix(), from, first, from, first, text))
}

// call is the gateway's answer to one request.
type tgAnswer struct {
	status int
	body   map[string]any
}

func (sh *tgShop) call(t *testing.T, method, path string, body any) tgAnswer {
	t.Helper()
	status, _, out := sh.s.api(t, sh.key, method, path, body)
	return tgAnswer{status, out}
}

// botCalls returns the Bot API calls since the first n.
func (sh *tgShop) botCalls(n int) []telegramfake.Call {
	return sh.bot.Calls()[n:]
}

// TestTelegramEndToEnd drives every Telegram send, its limits and errors,
// the callback_query postback and the read API through the gateway, and
// checks what the fake Bot API received (or that it received nothing).
func TestTelegramEndToEnd(t *testing.T) {
	t.Parallel()
	sh := newTgShop(t)

	// A customer writes; the developer learns the conversation from the
	// webhook, as in the getting-started path.
	sh.customerWrites(t, 1, 4242, "Ada", time.Now().Add(-time.Minute), "Do you have shirts?")
	var first struct {
		Data struct {
			ConversationID string `json:"conversation_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(sh.rcv.WaitFor(t, "message.received").Body, &first); err != nil {
		t.Fatal(err)
	}
	conv := first.Data.ConversationID
	if conv == "" {
		t.Fatal("message.received without conversation_id")
	}

	t.Run("image then text", func(t *testing.T) {
		before := len(sh.bot.Calls())
		got := sh.call(t, http.MethodPost, "/v1/image", map[string]any{
			"conversation_id": conv, "image_url": "https://cdn.shop.example/shirt.jpg", "text": "Our blue shirt",
		})
		if got.status != http.StatusCreated {
			t.Fatalf("POST /v1/image = %d %v", got.status, got.body)
		}
		calls := sh.botCalls(before)
		if len(calls) != 2 || calls[0].Method != "sendPhoto" || calls[1].Method != "sendMessage" {
			t.Fatalf("bot calls = %+v, want sendPhoto then sendMessage", calls)
		}
		for _, c := range calls {
			if c.Token != sh.botToken || c.Params["chat_id"] != float64(4242) {
				t.Fatalf("call %s: token %q chat_id %v", c.Method, c.Token, c.Params["chat_id"])
			}
		}
		if calls[0].Params["photo"] != "https://cdn.shop.example/shirt.jpg" || calls[0].Params["caption"] != nil {
			t.Errorf("sendPhoto = %v", calls[0].Params)
		}
		if calls[1].Params["text"] != "Our blue shirt" {
			t.Errorf("sendMessage = %v", calls[1].Params)
		}
		msgs, _ := got.body["messages"].([]any)
		if len(msgs) != 2 || !reflect.DeepEqual(got.body["message"], msgs[0]) {
			t.Fatalf("answer = %v, want message and messages[2] with the image first", got.body)
		}
		image, text := msgs[0].(map[string]any), msgs[1].(map[string]any)
		if image["type"] != "image" || image["content"] != "https://cdn.shop.example/shirt.jpg" || image["sender"] != "user" ||
			image["external_id"] != "1" || image["conversation_id"] != conv {
			t.Errorf("image message = %v", image)
		}
		if text["type"] != "text" || text["content"] != "Our blue shirt" || text["external_id"] != "2" {
			t.Errorf("text message = %v", text)
		}
		// Both stored, with Telegram's message ids, newest first.
		stored := sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=2", nil)
		list, _ := stored.body["messages"].([]any)
		if len(list) != 2 || !reflect.DeepEqual(list[0], text) || !reflect.DeepEqual(list[1], image) {
			t.Errorf("stored = %v", stored.body)
		}

		// Without text: the photo alone.
		before = len(sh.bot.Calls())
		got = sh.call(t, http.MethodPost, "/v1/image", map[string]any{"conversation_id": conv, "image_url": "https://cdn.shop.example/red.png"})
		if msgs, _ := got.body["messages"].([]any); got.status != http.StatusCreated || len(msgs) != 1 {
			t.Fatalf("image without text = %d %v", got.status, got.body)
		}
		if calls := sh.botCalls(before); len(calls) != 1 || calls[0].Method != "sendPhoto" {
			t.Fatalf("bot calls = %+v", calls)
		}
	})

	t.Run("carousel", func(t *testing.T) {
		before := len(sh.bot.Calls())
		got := sh.call(t, http.MethodPost, "/v1/carousel", map[string]any{
			"conversation_id": conv,
			"ratio":           "square",
			"elements": []map[string]any{
				{"title": "Blue shirt", "subtitle": "Cotton, all sizes", "image_url": "https://cdn.shop.example/blue.jpg", "buttons": []map[string]any{
					{"type": "web_url", "title": "See more", "url": "https://shop.example/blue"},
					{"type": "postback", "title": "Add to cart", "payload": "ADD_BLUE"},
				}},
				{"title": "Red shirt", "image_url": "https://cdn.shop.example/red.jpg"},
				{"title": "Gift card", "subtitle": "Any amount", "buttons": []map[string]any{
					{"type": "postback", "title": "Talk to us", "payload": "HUMAN"},
				}},
			},
		})
		if got.status != http.StatusCreated {
			t.Fatalf("POST /v1/carousel = %d %v", got.status, got.body)
		}
		calls := sh.botCalls(before)
		if len(calls) != 3 {
			t.Fatalf("bot calls = %+v, want one per card", calls)
		}
		want := []struct {
			method, field, value string
			markup               string
		}{
			{"sendPhoto", "caption", "Blue shirt\nCotton, all sizes",
				`{"inline_keyboard":[[{"text":"See more","url":"https://shop.example/blue"}],[{"callback_data":"ADD_BLUE","text":"Add to cart"}]]}`},
			{"sendPhoto", "caption", "Red shirt", `null`},
			{"sendMessage", "text", "Gift card\nAny amount", `{"inline_keyboard":[[{"callback_data":"HUMAN","text":"Talk to us"}]]}`},
		}
		for i, w := range want {
			c := calls[i]
			markup, _ := json.Marshal(c.Params["reply_markup"])
			if c.Method != w.method || c.Params[w.field] != w.value || string(markup) != w.markup || c.Params["chat_id"] != float64(4242) {
				t.Errorf("card %d: %s %v, want %s %s=%q markup %s", i, c.Method, c.Params, w.method, w.field, w.value, w.markup)
			}
		}
		if calls[0].Params["photo"] != "https://cdn.shop.example/blue.jpg" || calls[1].Params["photo"] != "https://cdn.shop.example/red.jpg" {
			t.Errorf("photos = %v, %v", calls[0].Params["photo"], calls[1].Params["photo"])
		}
		msg, _ := got.body["message"].(map[string]any)
		md, _ := msg["metadata"].(map[string]any)
		ids, _ := json.Marshal(md["external_ids"])
		if msg["type"] != "carousel" || msg["sender"] != "user" || msg["external_id"] != "4" || string(ids) != `["4","5","6"]` || md["ratio"] != "square" {
			t.Fatalf("carousel message = %v", msg)
		}
		if elements, _ := md["elements"].([]any); len(elements) != 3 {
			t.Errorf("metadata.elements = %v", md["elements"])
		}
		// One stored message for the whole carousel.
		stored := sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=1", nil)
		if list, _ := stored.body["messages"].([]any); len(list) != 1 || !reflect.DeepEqual(list[0], msg) {
			t.Errorf("stored = %v, want %v", stored.body, msg)
		}
	})

	t.Run("typing", func(t *testing.T) {
		before := len(sh.bot.Calls())
		got := sh.call(t, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": conv})
		if got.status != http.StatusOK || !reflect.DeepEqual(got.body, map[string]any{"ok": true}) {
			t.Fatalf("POST /v1/typing = %d %v", got.status, got.body)
		}
		calls := sh.botCalls(before)
		if len(calls) != 1 || calls[0].Method != "sendChatAction" ||
			!reflect.DeepEqual(calls[0].Params, map[string]any{"chat_id": float64(4242), "action": "typing"}) {
			t.Fatalf("bot calls = %+v", calls)
		}
	})

	t.Run("limits and codes reach nothing", func(t *testing.T) {
		messagesBefore := len(sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=100", nil).body["messages"].([]any))
		before := len(sh.bot.Calls())
		card := func(n int) map[string]any {
			return map[string]any{"title": fmt.Sprintf("Card %d", n), "image_url": "https://cdn.shop.example/c.jpg"}
		}
		button := map[string]any{"type": "postback", "title": "Yes", "payload": "YES"}
		cards := func(n int) []map[string]any {
			out := make([]map[string]any, n)
			for i := range out {
				out[i] = card(i)
			}
			return out
		}
		quick := func(n int) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf("Option %d", i)
			}
			return out
		}
		tests := []struct {
			name, path string
			body       map[string]any
			status     int
			code, says string
		}{
			{"tag on messages", "/v1/messages", map[string]any{"conversation_id": conv, "text": "hi", "tag": "ACCOUNT_UPDATE"}, 400, "tag_unsupported", "tag"},
			{"tag on image", "/v1/image", map[string]any{"conversation_id": conv, "image_url": "https://cdn.shop.example/a.jpg", "tag": "POST_PURCHASE_UPDATE"}, 400, "tag_unsupported", "tag"},
			{"tag on carousel", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": cards(1), "tag": "CONFIRMED_EVENT_UPDATE"}, 400, "tag_unsupported", "tag"},
			{"tag on typing", "/v1/typing", map[string]any{"conversation_id": conv, "tag": "HUMAN_AGENT"}, 400, "tag_unsupported", "tag"},
			{"null tag", "/v1/messages", map[string]any{"conversation_id": conv, "text": "hi", "tag": nil}, 400, "tag_unsupported", "tag"},

			{"11 elements", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": cards(11)}, 400, "invalid_request", "elements"},
			{"no elements", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []any{}}, 400, "invalid_request", "elements"},
			{"title of 81 characters", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{
				{"title": strings.Repeat("ü", 81)}}}, 400, "invalid_request", "elements[0].title"},
			{"4 buttons on a card", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{
				card(0), {"title": "Busy", "buttons": []any{button, button, button, button}}}}, 400, "invalid_request", "elements[1].buttons"},
			{"http image_url on a card", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{
				{"title": "Plain", "image_url": "http://cdn.shop.example/c.jpg"}}}, 400, "invalid_request", "elements[0].image_url"},
			{"http button url on a card", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{
				{"title": "Plain", "buttons": []any{map[string]any{"type": "web_url", "title": "Go", "url": "http://shop.example"}}}}}, 400, "invalid_request", "elements[0].buttons[0].url"},
			{"bad ratio", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": cards(1), "ratio": "wide"}, 400, "invalid_request", "ratio"},

			{"14 quick replies", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Pick", "quick_replies": quick(14)}, 400, "invalid_request", "quick_replies"},
			{"quick reply of 21 characters", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Pick", "quick_replies": []string{"ok", strings.Repeat("x", 21)}}, 400, "invalid_request", "quick_replies[1]"},
			{"quick replies with buttons", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Pick", "quick_replies": []string{"a"}, "buttons": []any{button}}, 400, "invalid_request", "quick_replies"},
			{"4 buttons", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Pick", "buttons": []any{button, button, button, button}}, 400, "invalid_request", "buttons"},
			{"http button url", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Go", "buttons": []any{map[string]any{"type": "web_url", "title": "Go", "url": "http://shop.example"}}}, 400, "invalid_request", "buttons[0].url"},
			{"callback_data over 64 bytes", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Go", "buttons": []any{map[string]any{"type": "postback", "title": "Go", "payload": strings.Repeat("p", 65)}}}, 400, "invalid_request", "buttons[0].payload"},
			{"no text", "/v1/messages", map[string]any{"conversation_id": conv}, 400, "invalid_request", "text"},
			{"http image_url", "/v1/image", map[string]any{"conversation_id": conv, "image_url": "http://cdn.shop.example/a.jpg"}, 400, "invalid_request", "image_url"},
			{"no conversation_id", "/v1/typing", map[string]any{}, 400, "invalid_request", "conversation_id"},

			{"unknown conversation on messages", "/v1/messages", map[string]any{"conversation_id": "0190a4e2-7c1d-7000-8000-000000000001", "text": "hi"}, 404, "conversation_not_found", ""},
			{"unknown conversation on image", "/v1/image", map[string]any{"conversation_id": "0190a4e2-7c1d-7000-8000-000000000001", "image_url": "https://cdn.shop.example/a.jpg"}, 404, "conversation_not_found", ""},
			{"unknown conversation on carousel", "/v1/carousel", map[string]any{"conversation_id": "0190a4e2-7c1d-7000-8000-000000000001", "elements": cards(1)}, 404, "conversation_not_found", ""},
			{"unknown conversation on typing", "/v1/typing", map[string]any{"conversation_id": "0190a4e2-7c1d-7000-8000-000000000001"}, 404, "conversation_not_found", ""},
			{"conversation id that is no id", "/v1/messages", map[string]any{"conversation_id": "not-a-uuid", "text": "hi"}, 404, "conversation_not_found", ""},
		}
		for _, tt := range tests {
			got := sh.call(t, http.MethodPost, tt.path, tt.body)
			msg, _ := got.body["message"].(string)
			if got.status != tt.status || got.body["code"] != tt.code || !strings.Contains(msg, tt.says) {
				t.Errorf("%s: %d %v, want %d %s naming %q", tt.name, got.status, got.body, tt.status, tt.code, tt.says)
			}
		}
		if calls := sh.botCalls(before); len(calls) != 0 {
			t.Errorf("refused requests reached Telegram: %+v", calls)
		}
		if n := len(sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=100", nil).body["messages"].([]any)); n != messagesBefore {
			t.Errorf("messages = %d after refused requests, want %d", n, messagesBefore)
		}
	})

	t.Run("telegram refuses", func(t *testing.T) {
		stored := func() int {
			return len(sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=100", nil).body["messages"].([]any))
		}
		messagesBefore := stored()
		const blocked = "Forbidden: bot was blocked by the user"
		tests := []struct {
			method, path string
			body         map[string]any
		}{
			{"sendMessage", "/v1/messages", map[string]any{"conversation_id": conv, "text": "Still there?"}},
			{"sendPhoto", "/v1/image", map[string]any{"conversation_id": conv, "image_url": "https://cdn.shop.example/a.jpg", "text": "Look"}},
			{"sendPhoto", "/v1/carousel", map[string]any{"conversation_id": conv, "elements": []map[string]any{{"title": "A", "image_url": "https://cdn.shop.example/a.jpg"}}}},
			{"sendChatAction", "/v1/typing", map[string]any{"conversation_id": conv}},
		}
		for _, tt := range tests {
			before := len(sh.bot.Calls())
			sh.bot.FailNext(tt.method, 403, blocked)
			got := sh.call(t, http.MethodPost, tt.path, tt.body)
			msg, _ := got.body["message"].(string)
			if got.status != http.StatusBadGateway || got.body["code"] != "platform_error" || !strings.Contains(msg, blocked) {
				t.Errorf("%s refused: %d %v, want 502 platform_error with Telegram's description", tt.path, got.status, got.body)
			}
			// Telegram was asked once, and nothing followed the refusal.
			if calls := sh.botCalls(before); len(calls) != 1 || calls[0].Method != tt.method {
				t.Errorf("%s: bot calls = %+v", tt.path, calls)
			}
		}
		if n := stored(); n != messagesBefore {
			t.Errorf("messages = %d after refused sends, want %d (nothing stored)", n, messagesBefore)
		}
	})

	t.Run("button tap becomes postback.received", func(t *testing.T) {
		// The customer taps "Talk to us" under the gift card (message 6).
		before := len(sh.bot.Calls())
		tap := `{"update_id": 2, "callback_query": {"id": "4382bfdwdsb323b2d9",
			"from": {"id": 4242, "is_bot": false, "first_name": "Ada", "language_code": "en"},
			"message": {"message_id": 6, "from": {"id": 700100200, "is_bot": true, "first_name": "Shop", "username": "shop_bot"},
				"chat": {"id": 4242, "first_name": "Ada", "type": "private"}, "date": ` + fmt.Sprint(time.Now().Add(-time.Minute).Unix()) + `,
				"text": "Gift card\nAny amount",
				"reply_markup": {"inline_keyboard": [[{"text": "Talk to us", "callback_data": "HUMAN"}]]}},
			"chat_instance": "-8172631123", "data": "HUMAN"}}`
		tappedAfter := time.Now().Add(-time.Second)
		sh.update(t, tap)
		sh.update(t, tap) // Telegram redelivers; forwarded once

		calls := sh.botCalls(before)
		if len(calls) == 0 || calls[0].Method != "answerCallbackQuery" || calls[0].Token != sh.botToken ||
			!reflect.DeepEqual(calls[0].Params, map[string]any{"callback_query_id": "4382bfdwdsb323b2d9"}) {
			t.Fatalf("bot calls = %+v, want answerCallbackQuery first", calls)
		}

		got := sh.rcv.WaitFor(t, "postback.received")
		verifySignature(t, got, sh.secret)
		checkDeliveryHeaders(t, got, "postback.received")
		var env customerEvent
		if err := json.Unmarshal(got.Body, &env); err != nil {
			t.Fatalf("envelope: %v\n%s", err, got.Body)
		}
		d := env.Data
		if env.Event != "postback.received" || env.ID != got.Header.Get("X-Service-Delivery") || d.WorkspaceID != sh.ws ||
			d.ConversationID != conv || d.Platform != "telegram" {
			t.Errorf("envelope = %s", got.Body)
		}
		if !reflect.DeepEqual(d.Channel, map[string]any{"kind": "telegram", "external_id": "700100200"}) {
			t.Errorf("data.channel = %v", d.Channel)
		}
		if d.Contact["sender_id"] != "4242" || d.Contact["name"] != "Ada" || d.Contact["id"] == "" || d.Contact["profile_pic"] != "" || len(d.Contact) != 4 {
			t.Errorf("data.contact = %v", d.Contact)
		}
		if d.Message["id"] == "" || d.Message["text"] != "Talk to us" || d.Message["type"] != "postback" ||
			d.Message["external_id"] != "4382bfdwdsb323b2d9" || !isUTCTimestamp(fmt.Sprint(d.Message["created_at"])) {
			t.Errorf("data.message = %v", d.Message)
		}
		if _, ok := d.Message["attachment"]; ok {
			t.Errorf("data.message.attachment on a postback: %v", d.Message)
		}
		receivedAt, err := time.Parse(time.RFC3339Nano, d.Postback["received_at"])
		if d.Postback["payload"] != "HUMAN" || err != nil || receivedAt.Location() != time.UTC ||
			receivedAt.Before(tappedAfter) || receivedAt.After(time.Now()) || len(d.Postback) != 2 {
			t.Errorf("data.postback = %v, want payload HUMAN received now", d.Postback)
		}
		// The tap is in the inbox as the customer's postback.
		stored := sh.call(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?limit=1", nil)
		m := stored.body["messages"].([]any)[0].(map[string]any)
		if m["id"] != d.Message["id"] || m["sender"] != "contact" || m["type"] != "postback" || m["content"] != "Talk to us" ||
			!reflect.DeepEqual(m["metadata"], map[string]any{"payload": "HUMAN"}) {
			t.Errorf("stored postback = %v", m)
		}
		time.Sleep(300 * time.Millisecond) // a second delivery would be on its way by now
		if n := sh.rcv.Count("postback.received"); n != 1 {
			t.Errorf("postback.received delivered %d times, want 1", n)
		}
	})

	t.Run("read API", func(t *testing.T) {
		// A second customer wrote 51 messages an hour ago, a second apart;
		// Ada's conversation (her tap, the replies) stays the most recent.
		start := time.Now().Add(-time.Hour)
		for i := 0; i < 51; i++ {
			sh.customerWrites(t, int64(100+i), 5151, "Bo", start.Add(time.Duration(i)*time.Second), fmt.Sprintf("message %d", i))
		}
		list := sh.call(t, http.MethodGet, "/v1/conversations?platform=telegram", nil)
		convs, _ := list.body["conversations"].([]any)
		if list.status != http.StatusOK || len(convs) != 2 || list.body["next_before"] != nil {
			t.Fatalf("telegram conversations = %d %v", list.status, list.body)
		}
		ada, bo := convs[0].(map[string]any), convs[1].(map[string]any)
		if ada["id"] != conv || bo["contact"].(map[string]any)["sender_id"] != "5151" {
			t.Fatalf("conversations, most recent first = %v", convs)
		}
		for _, c := range convs {
			c := c.(map[string]any)
			if c["platform"] != "telegram" || c["channel_id"] != sh.channel.ID {
				t.Errorf("conversation = %v", c)
			}
		}
		for _, p := range []string{"messenger", "instagram", "webchat"} {
			other := sh.call(t, http.MethodGet, "/v1/conversations?platform="+p, nil)
			if l, _ := other.body["conversations"].([]any); other.status != http.StatusOK || l == nil || len(l) != 0 {
				t.Errorf("platform=%s: %d %v, want an empty list", p, other.status, other.body)
			}
		}
		page := sh.call(t, http.MethodGet, "/v1/conversations?limit=1", nil)
		if l, _ := page.body["conversations"].([]any); len(l) != 1 || l[0].(map[string]any)["id"] != conv || page.body["next_before"] == nil {
			t.Fatalf("limit=1 = %v", page.body)
		}
		next := sh.call(t, http.MethodGet, "/v1/conversations?limit=1&before="+url.QueryEscape(fmt.Sprint(page.body["next_before"])), nil)
		if l, _ := next.body["conversations"].([]any); len(l) != 1 || l[0].(map[string]any)["id"] != bo["id"] || next.body["next_before"] != nil {
			t.Fatalf("second page = %v", next.body)
		}

		// Messages: 50 by default, the 51st on the next page.
		msgs := sh.call(t, http.MethodGet, "/v1/conversations/"+fmt.Sprint(bo["id"])+"/messages", nil)
		l, _ := msgs.body["messages"].([]any)
		if msgs.status != http.StatusOK || len(l) != 50 || l[0].(map[string]any)["content"] != "message 50" || msgs.body["next_before"] == nil {
			t.Fatalf("messages default page: %d, %d messages, next_before %v", msgs.status, len(l), msgs.body["next_before"])
		}
		rest := sh.call(t, http.MethodGet, "/v1/conversations/"+fmt.Sprint(bo["id"])+"/messages?before="+url.QueryEscape(fmt.Sprint(msgs.body["next_before"])), nil)
		if l, _ := rest.body["messages"].([]any); len(l) != 1 || l[0].(map[string]any)["content"] != "message 0" || rest.body["next_before"] != nil {
			t.Fatalf("messages second page = %v", rest.body)
		}
		if full := sh.call(t, http.MethodGet, "/v1/conversations/"+fmt.Sprint(bo["id"])+"/messages?limit=100", nil); len(full.body["messages"].([]any)) != 51 {
			t.Fatalf("limit=100 = %d messages", len(full.body["messages"].([]any)))
		}

		bad := []struct{ path, names string }{
			{"/v1/conversations?platform=whatsapp", "platform"},
			{"/v1/conversations?before=yesterday", "before"},
			{"/v1/conversations?before=2026-01-02", "before"},
			{"/v1/conversations?limit=abc", "limit"},
			{"/v1/conversations?limit=0", "limit"},
			{"/v1/conversations?limit=-5", "limit"},
			{"/v1/conversations?limit=101", "limit"},
			{"/v1/conversations/" + conv + "/messages?limit=101", "limit"},
			{"/v1/conversations/" + conv + "/messages?limit=ten", "limit"},
			{"/v1/conversations/" + conv + "/messages?before=1700000000", "before"},
		}
		for _, b := range bad {
			got := sh.call(t, http.MethodGet, b.path, nil)
			msg, _ := got.body["message"].(string)
			if got.status != http.StatusBadRequest || got.body["code"] != "invalid_request" || !strings.Contains(msg, b.names) {
				t.Errorf("GET %s = %d %v, want 400 invalid_request naming %s", b.path, got.status, got.body, b.names)
			}
		}
		if got := sh.call(t, http.MethodGet, "/v1/conversations/0190a4e2-7c1d-7000-8000-000000000001/messages", nil); got.status != http.StatusNotFound || got.body["code"] != "conversation_not_found" {
			t.Errorf("unknown conversation's messages = %d %v", got.status, got.body)
		}
	})
}
