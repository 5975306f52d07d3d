package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// TestGettingStarted plays the README's quick start (README.md "Quick
// start") against the built binaries: the demo workspace and key, the webhook and its
// test event, the channel switched to external, a customer's Telegram message
// arriving as a signed message.received webhook, and the developer's answer
// reaching the customer on Telegram.
func TestGettingStarted(t *testing.T) {
	t.Parallel()
	telegram, telegramAPI := telegramfake.Start(t)
	s := startSuite(t, "TELEGRAM_API_BASE="+telegramAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")

	// Step 1: the operator seeds the demo workspace; it has an API key.
	var demo struct {
		Workspace struct {
			ID   string `json:"id"`
			Slug string `json:"slug"`
		} `json:"workspace"`
		APIKey     string `json:"api_key"`
		GatewayURL string `json:"gateway_url"`
		WebchatURL string `json:"webchat_url"`
		Channels   []struct {
			ID         string `json:"id"`
			Kind       string `json:"kind"`
			ExternalID string `json:"external_id"`
		} `json:"channels"`
		TelegramIngress struct {
			URL         string `json:"url"`
			SecretToken string `json:"secret_token"`
		} `json:"telegram_ingress"`
	}
	s.ctl(t, &demo, "demo")
	if demo.GatewayURL != s.gatewayURL || demo.Workspace.Slug != "demo" || len(demo.Channels) != 2 ||
		demo.Channels[0].Kind != "telegram" || demo.Channels[1].Kind != "webchat" || demo.WebchatURL != s.messagingURL+"/webchat/"+demo.Channels[1].ID {
		t.Fatalf("demo output: %+v", demo)
	}
	var again struct {
		Workspace struct{ ID string }   `json:"workspace"`
		Channels  []struct{ ID string } `json:"channels"`
	}
	s.ctl(t, &again, "demo")
	if again.Workspace.ID != demo.Workspace.ID || again.Channels[0].ID != demo.Channels[0].ID || again.Channels[1].ID != demo.Channels[1].ID {
		t.Fatalf("demo is not idempotent: first %+v, then %+v", demo, again)
	}
	key := demo.APIKey
	channel := demo.Channels[0]

	status, _, me := s.api(t, key, http.MethodGet, "/v1/me", nil)
	if status != http.StatusOK || me["workspace"].(map[string]any)["id"] != demo.Workspace.ID {
		t.Fatalf("GET /v1/me = %d %v", status, me)
	}

	// Step 2: save the webhook URL, keep the secret, send the test event.
	rcv := newReceiver(t)
	status, _, saved := s.api(t, key, http.MethodPut, "/v1/webhook", map[string]string{"url": rcv.URL})
	if status != http.StatusOK {
		t.Fatalf("PUT /v1/webhook = %d %v", status, saved)
	}
	secret, _ := saved["secret"].(string)
	if secret == "" || saved["webhook"].(map[string]any)["url"] != rcv.URL {
		t.Fatalf("PUT /v1/webhook body: %v", saved)
	}
	status, _, tested := s.api(t, key, http.MethodPost, "/v1/webhook/test", nil)
	delivery, _ := tested["delivery"].(map[string]any)
	if status != http.StatusOK || delivery["status"] != "delivered" || delivery["response_status"] != float64(204) || delivery["event"] != "test" {
		t.Fatalf("POST /v1/webhook/test = %d %v", status, tested)
	}
	for _, field := range []string{"id", "event", "payload", "status", "attempts", "response_status", "last_error", "delivered_at", "created_at"} {
		if _, ok := delivery[field]; !ok {
			t.Errorf("delivery lacks %q: %v", field, delivery)
		}
	}
	testReq := rcv.WaitFor(t, "test")
	verifySignature(t, testReq, secret)
	if testReq.Header.Get("X-Service-Delivery") != delivery["id"] {
		t.Errorf("test X-Service-Delivery %q, delivery id %v", testReq.Header.Get("X-Service-Delivery"), delivery["id"])
	}

	// Step 3: switch the Telegram channel to external.
	var mode struct {
		Channel struct {
			AIMode string `json:"ai_mode"`
		} `json:"channel"`
	}
	s.ctl(t, &mode, "channel", "set-mode", "--channel", channel.ID, "--mode", "external")
	if mode.Channel.AIMode != "external" {
		t.Fatalf("set-mode output: %+v", mode)
	}

	// A customer writes to the bot: Telegram posts the Update to the ingress.
	sentAt := time.Now().Add(-2 * time.Second).Unix()
	update := fmt.Sprintf(`{"update_id": 900001, "message": {"message_id": 77, "date": %d,
		"from": {"id": 4242, "is_bot": false, "first_name": "Ada", "last_name": "Lovelace", "language_code": "en"},
		"chat": {"id": 4242, "first_name": "Ada", "last_name": "Lovelace", "type": "private"},
		"text": "Where is my order?"}}`, sentAt)
	postUpdate(t, demo.TelegramIngress.URL, demo.TelegramIngress.SecretToken, update)
	postUpdate(t, demo.TelegramIngress.URL, demo.TelegramIngress.SecretToken, update) // Telegram retries; stored once

	got := rcv.WaitFor(t, "message.received")
	verifySignature(t, got, secret)
	checkDeliveryHeaders(t, got, "message.received")
	var envelope customerEvent
	if err := json.Unmarshal(got.Body, &envelope); err != nil {
		t.Fatalf("envelope: %v\n%s", err, got.Body)
	}
	if envelope.ID != got.Header.Get("X-Service-Delivery") || envelope.Event != "message.received" || !isUTCTimestamp(envelope.CreatedAt) {
		t.Errorf("envelope head: %+v", envelope)
	}
	d := envelope.Data
	if d.WorkspaceID != demo.Workspace.ID || d.ConversationID == "" || d.Platform != "telegram" {
		t.Errorf("envelope data: %+v", d)
	}
	if d.Channel["kind"] != "telegram" || d.Channel["external_id"] != channel.ExternalID {
		t.Errorf("data.channel = %v", d.Channel)
	}
	for _, f := range []string{"id", "sender_id", "name", "profile_pic"} {
		if _, ok := d.Contact[f]; !ok {
			t.Errorf("data.contact lacks %q: %v", f, d.Contact)
		}
	}
	if d.Contact["sender_id"] != "4242" || d.Contact["name"] != "Ada Lovelace" {
		t.Errorf("data.contact = %v", d.Contact)
	}
	if d.Message["text"] != "Where is my order?" || d.Message["type"] != "text" || d.Message["external_id"] != "77" || d.Message["id"] == "" {
		t.Errorf("data.message = %v", d.Message)
	}
	if ts, _ := d.Message["created_at"].(string); ts != time.Unix(sentAt, 0).UTC().Format(time.RFC3339) && !sameInstant(ts, sentAt) {
		t.Errorf("data.message.created_at = %v, want the Telegram date %d", d.Message["created_at"], sentAt)
	}
	if _, ok := d.Message["attachment"]; ok {
		t.Errorf("data.message.attachment present for a text message: %v", d.Message)
	}

	// Step 4: answer with POST /v1/messages; the customer gets it on Telegram.
	status, _, sent := s.api(t, key, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": d.ConversationID,
		"text":            "It ships today.",
		"buttons": []map[string]string{
			{"type": "web_url", "title": "Track", "url": "https://shop.example/track/77"},
			{"type": "postback", "title": "Talk to us", "payload": "HUMAN"},
		},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/messages = %d %v", status, sent)
	}
	msg := sent["message"].(map[string]any)
	if msg["sender"] != "user" || msg["external_id"] == "" {
		t.Errorf("sent message = %v", msg)
	}
	calls := telegram.Calls()
	if len(calls) != 1 || calls[0].Method != "sendMessage" || calls[0].Token != "123456:parley-demo-bot-token" {
		t.Fatalf("telegram calls = %+v", calls)
	}
	p := calls[0].Params
	keyboard, _ := json.Marshal(p["reply_markup"])
	if p["chat_id"] != float64(4242) && p["chat_id"] != "4242" {
		t.Errorf("chat_id = %v", p["chat_id"])
	}
	if p["text"] != "It ships today." {
		t.Errorf("text = %v", p["text"])
	}
	wantKeyboard := `{"inline_keyboard":[[{"text":"Track","url":"https://shop.example/track/77"}],[{"callback_data":"HUMAN","text":"Talk to us"}]]}`
	if string(keyboard) != wantKeyboard {
		t.Errorf("reply_markup = %s, want %s", keyboard, wantKeyboard)
	}

	// The inbox holds both messages; the reply never comes back as a webhook.
	status, _, msgs := s.api(t, key, http.MethodGet, "/v1/conversations/"+d.ConversationID+"/messages", nil)
	list, _ := msgs["messages"].([]any)
	if status != http.StatusOK || len(list) != 2 {
		t.Fatalf("messages = %d %v", status, msgs)
	}
	if list[0].(map[string]any)["sender"] != "user" || list[1].(map[string]any)["sender"] != "contact" {
		t.Errorf("messages newest first: %v", list)
	}
	// Another workspace's key sees nothing of this one.
	var other struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
	}
	s.ctl(t, &other, "workspace", "create", "--name", "Other shop")
	var otherKey struct {
		Key string `json:"key"`
	}
	s.ctl(t, &otherKey, "apikey", "create", "--workspace", other.Workspace.ID)
	if status, _, body := s.api(t, otherKey.Key, http.MethodGet, "/v1/conversations/"+d.ConversationID+"/messages", nil); status != http.StatusNotFound || body["code"] != "conversation_not_found" {
		t.Errorf("other workspace reading the conversation = %d %v, want 404 conversation_not_found", status, body)
	}
	if status, _, body := s.api(t, otherKey.Key, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": d.ConversationID, "text": "hi"}); status != http.StatusNotFound || body["code"] != "conversation_not_found" {
		t.Errorf("other workspace answering the conversation = %d %v, want 404 conversation_not_found", status, body)
	}
	if status, _, body := s.api(t, otherKey.Key, http.MethodGet, "/v1/conversations", nil); status != http.StatusOK || len(body["conversations"].([]any)) != 0 {
		t.Errorf("other workspace's conversations = %d %v, want none", status, body)
	}
	if len(telegram.Calls()) != 1 {
		t.Errorf("a refused send reached Telegram: %+v", telegram.Calls())
	}

	time.Sleep(500 * time.Millisecond)
	if n := rcv.Count("message.received"); n != 1 {
		t.Errorf("receiver got %d message.received deliveries, want 1 (the retried update and the API reply must not add any)", n)
	}
}

// postUpdate posts a Telegram update as Telegram does and wants it taken.
func postUpdate(t *testing.T, url, secret, body string) {
	t.Helper()
	if st := postUpdateStatus(t, url, secret, body); st != http.StatusOK {
		t.Fatalf("telegram ingress = %d", st)
	}
}

// postUpdateStatus posts a Telegram update as Telegram does and returns
// the status it was answered with.
func postUpdateStatus(t *testing.T, url, secret, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post update: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func checkDeliveryHeaders(t *testing.T, req receiver.Request, event string) {
	t.Helper()
	h := req.Header
	if h.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type = %q", h.Get("Content-Type"))
	}
	if ua := h.Get("User-Agent"); !regexp.MustCompile(`^Parley-Webhooks/\S+$`).MatchString(ua) {
		t.Errorf("User-Agent = %q", ua)
	}
	if h.Get("X-Service-Event") != event {
		t.Errorf("X-Service-Event = %q", h.Get("X-Service-Event"))
	}
	if !uuidPattern.MatchString(h.Get("X-Service-Delivery")) {
		t.Errorf("X-Service-Delivery = %q is not a UUID", h.Get("X-Service-Delivery"))
	}
	if !regexp.MustCompile(`^sha256=[0-9a-f]{64}$`).MatchString(h.Get("X-Service-Signature")) {
		t.Errorf("X-Service-Signature = %q", h.Get("X-Service-Signature"))
	}
}

func isUTCTimestamp(s string) bool {
	ts, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && ts.Location() == time.UTC
}

func sameInstant(s string, unix int64) bool {
	ts, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && ts.Unix() == unix && ts.Location() == time.UTC
}
