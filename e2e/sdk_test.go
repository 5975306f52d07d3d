package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/openapi"
	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	parley "github.com/parleyhq/parley/sdk/go"
	"github.com/parleyhq/parley/sdk/go/webhook"
)

// The Go client's tests against the built services: every call of
// sdk/go through a real gateway with a real API key, its typed answers
// checked against what the services stored and what the platform fakes
// received; its retries against a real 429, a real 503 and a connection
// that drops under a send; its streams read whole, dropped and abandoned;
// and sdk/go/webhook's handler as the receiver of the real dispatcher.

// sdkTimeout bounds each test's calls.
const sdkTimeout = 2 * time.Minute

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	t.Cleanup(cancel)
	return ctx
}

// wantAPIError checks that err is the documented refusal: errors.Is with
// sentinel, a *parley.Error with status and code, and the request id of
// the answer the client got last.
func wantAPIError(t *testing.T, what string, err, sentinel error, status int, x *exchanges) *parley.Error {
	t.Helper()
	var apiErr *parley.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &apiErr) {
		t.Fatalf("%s: error %v (%T), want %v", what, err, err, sentinel)
	}
	last := x.last()
	if apiErr.Status != status || apiErr.Message == "" || apiErr.RequestID == "" || apiErr.RequestID != last.requestID {
		t.Fatalf("%s: %+v, want status %d, a message, and request id %q (X-Request-Id)", what, apiErr, status, last.requestID)
	}
	return apiErr
}

// hookServer is a developer's webhook endpoint built on sdk/go/webhook:
// NewHandler verifies and decodes each delivery and, through a
// MemoryStore, passes each delivery id on once; the server records what
// the dispatcher posted and what the handler answered.
type hookServer struct {
	srv *httptest.Server
	URL string

	mu      sync.Mutex
	posts   []hookPost
	handled []*webhook.Event
	arrived chan struct{}
}

type hookPost struct {
	delivery string
	status   int
}

// newHookServer listens at once (its URL can be saved as the webhook) and
// serves once start gives it the secret.
func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{srv: httptest.NewUnstartedServer(nil), arrived: make(chan struct{}, 1)}
	h.URL = "http://" + h.srv.Listener.Addr().String() + "/hooks/parley"
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) start(secret string) {
	handler := webhook.NewHandler(secret, webhook.NewMemoryStore(0, 0), func(_ context.Context, ev *webhook.Event) error {
		h.mu.Lock()
		h.handled = append(h.handled, ev)
		h.mu.Unlock()
		return nil
	})
	h.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		handler.ServeHTTP(rec, r)
		h.mu.Lock()
		h.posts = append(h.posts, hookPost{delivery: r.Header.Get("X-Service-Delivery"), status: rec.status})
		h.mu.Unlock()
		select {
		case h.arrived <- struct{}{}:
		default:
		}
	})
	h.srv.Start()
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// events returns the events the handler passed on so far.
func (h *hookServer) events() []*webhook.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*webhook.Event(nil), h.handled...)
}

// postsOf returns the posts of delivery id and what each was answered.
func (h *hookServer) postsOf(id string) []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookPost
	for _, p := range h.posts {
		if p.delivery == id {
			out = append(out, p)
		}
	}
	return out
}

// await waits until cond holds of the handled events.
func (h *hookServer) await(t *testing.T, what string, cond func([]*webhook.Event) bool) {
	t.Helper()
	wait.Until(t, 20*time.Second, what, func() bool { return cond(h.events()) })
}

// handledMessage finds the handled message.received whose text is text.
func handledMessage(evs []*webhook.Event, text string) (*webhook.Event, *webhook.MessageReceived) {
	for _, ev := range evs {
		if m, ok := ev.Data.(*webhook.MessageReceived); ok && m.Message.Text == text {
			return ev, m
		}
	}
	return nil, nil
}

// TestClientAgainstTelegram drives the client's reads, sends, errors and
// webhook management through the gateway of a workspace with a Telegram
// channel, with sdk/go/webhook's handler as the webhook, then its retries:
// a send whose answer the network loses reaches Telegram once, and a send
// made while the messaging service is down goes through once it is back.
func TestClientAgainstTelegram(t *testing.T) {
	t.Parallel()
	sh := newTgShop(t)
	ctx := sdkContext(t)
	c, x := sh.s.sdkClient(t, sh.key)

	// The document the gateway serves, which needs no key, is the one
	// checked in.
	doc, err := c.OpenAPIDocument(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, openapi.JSON()) {
		t.Fatalf("OpenAPIDocument: %d bytes, not the %d of pkg/openapi's JSON()", len(doc), len(openapi.JSON()))
	}

	// Me and Channels: the workspace and the channel parleyctl made.
	me, err := c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me.Workspace.ID != sh.ws || me.APIVersion != "v1" || me.RateLimit.PerMinute != 100_000 || len(me.Channels) != 1 || me.Channels[0].ID != sh.channel.ID {
		t.Fatalf("Me = %+v", me)
	}
	channels, err := c.Channels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(channels) != 1 || channels[0].ID != sh.channel.ID || channels[0].Kind != "telegram" || channels[0].AIMode != "external" || channels[0].ExternalID == "" {
		t.Fatalf("Channels = %+v", channels)
	}

	// The webhook is sdk/go/webhook's handler.
	hooks := newHookServer(t)
	saved, err := c.SaveWebhook(ctx, hooks.URL)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Webhook.URL != hooks.URL || saved.Webhook.Status != "active" || !strings.HasPrefix(saved.Secret, "whsec_") {
		t.Fatalf("SaveWebhook = %+v", saved)
	}
	hooks.start(saved.Secret)
	got, err := c.Webhook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != saved.Webhook.ID || got.URL != hooks.URL || got.Status != "active" {
		t.Fatalf("Webhook = %+v, want %+v", got, saved.Webhook)
	}

	// Two customers write: Ada once, Bo five times; each message reaches
	// the handler verified and typed.
	now := time.Now()
	sh.customerWrites(t, 1, 4242, "Ada", now.Add(-time.Hour), "Do you have shirts?")
	for i := range 5 {
		sh.customerWrites(t, int64(10+i), 5151, "Bo", now.Add(time.Duration(i-30)*time.Second), fmt.Sprintf("Bo's message %d", i))
	}
	hooks.await(t, "the six messages, verified", func(evs []*webhook.Event) bool { return len(evs) == 6 })
	ada, adaMsg := handledMessage(hooks.events(), "Do you have shirts?")
	_, boMsg := handledMessage(hooks.events(), "Bo's message 0")
	if ada == nil || boMsg == nil {
		t.Fatalf("no message.received for Ada's or Bo's text among %+v", hooks.events())
	}
	if ada.Kind != webhook.KindMessageReceived || adaMsg.WorkspaceID != sh.ws || adaMsg.Platform != "telegram" ||
		adaMsg.Channel.Kind != "telegram" || adaMsg.Channel.ExternalID != sh.channel.ExternalID ||
		adaMsg.Contact.SenderID != "4242" || adaMsg.Contact.Name != "Ada" || adaMsg.Message.Type != "text" || adaMsg.ConversationID == "" {
		t.Fatalf("Ada's message.received = %+v %+v", ada, adaMsg)
	}
	adaConv, boConv := adaMsg.ConversationID, boMsg.ConversationID

	// Conversations, a page at a time and every page: Bo wrote last.
	page, err := c.ListConversations(ctx, parley.ConversationsParams{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Conversations) != 1 || page.Conversations[0].ID != boConv || page.NextBefore == nil {
		t.Fatalf("ListConversations(limit 1) = %+v", page)
	}
	var convs []parley.Conversation
	for conv, err := range c.Conversations(ctx, parley.ConversationsParams{Platform: "telegram", Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, conv)
	}
	if len(convs) != 2 || convs[0].ID != boConv || convs[1].ID != adaConv || convs[1].Contact.SenderID != "4242" || convs[0].ChannelID != sh.channel.ID {
		t.Fatalf("Conversations = %+v", convs)
	}
	if pages := len(x.to(http.MethodGet, "/v1/conversations")); pages < 3 {
		t.Fatalf("the iterator read %d pages of one conversation each, want the 2 of them and the first call's", pages)
	}
	// Messages: five, newest first, over three pages of two.
	before := len(x.to(http.MethodGet, "/v1/conversations/"+boConv+"/messages"))
	var texts []string
	for m, err := range c.Messages(ctx, boConv, parley.MessagesParams{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.ConversationID != boConv || m.Sender != "contact" || m.Type != "text" {
			t.Fatalf("message = %+v", m)
		}
		texts = append(texts, m.Content)
	}
	if fmt.Sprint(texts) != "[Bo's message 4 Bo's message 3 Bo's message 2 Bo's message 1 Bo's message 0]" {
		t.Fatalf("Messages = %q", texts)
	}
	if pages := len(x.to(http.MethodGet, "/v1/conversations/"+boConv+"/messages")) - before; pages != 3 {
		t.Fatalf("Messages read %d pages, want 3", pages)
	}

	t.Run("sends", func(t *testing.T) {
		calls := len(sh.bot.Calls())
		sent, err := c.SendMessage(ctx, parley.SendMessageRequest{
			ConversationID: adaConv, Text: "Which colour?",
			Buttons: []parley.Button{
				{Type: "web_url", Title: "Catalogue", URL: "https://shop.example/shirts"},
				{Type: "postback", Title: "Blue", Payload: "BLUE"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		bot := sh.botCalls(calls)
		markup, _ := json.Marshal(bot[0].Params["reply_markup"])
		if len(bot) != 1 || bot[0].Method != "sendMessage" || bot[0].Params["text"] != "Which colour?" || bot[0].Params["chat_id"] != float64(4242) ||
			string(markup) != `{"inline_keyboard":[[{"text":"Catalogue","url":"https://shop.example/shirts"}],[{"callback_data":"BLUE","text":"Blue"}]]}` {
			t.Fatalf("bot calls = %+v", bot)
		}
		if sent.ConversationID != adaConv || sent.Sender != "user" || sent.Type != "text" || sent.Content != "Which colour?" || sent.ExternalID != sh.bot.LastMessageID() {
			t.Fatalf("SendMessage = %+v", sent)
		}
		newest, err := c.ListMessages(ctx, adaConv, parley.MessagesParams{Limit: 1})
		if err != nil || len(newest.Messages) != 1 || newest.Messages[0].ID != sent.ID {
			t.Fatalf("the newest stored message = %+v (%v), want the sent %s", newest, err, sent.ID)
		}

		calls = len(sh.bot.Calls())
		quick, err := c.SendMessage(ctx, parley.SendMessageRequest{ConversationID: adaConv, Text: "Size?", QuickReplies: []string{"M", "L"}})
		if err != nil {
			t.Fatal(err)
		}
		bot = sh.botCalls(calls)
		markup, _ = json.Marshal(bot[0].Params["reply_markup"])
		if len(bot) != 1 || !strings.Contains(string(markup), `"M"`) || !strings.Contains(string(markup), `"L"`) || quick.Content != "Size?" {
			t.Fatalf("quick replies: bot calls %+v, answer %+v", bot, quick)
		}

		calls = len(sh.bot.Calls())
		image, err := c.SendImage(ctx, parley.SendImageRequest{ConversationID: adaConv, ImageURL: "https://cdn.shop.example/blue.jpg", Text: "The blue one"})
		if err != nil {
			t.Fatal(err)
		}
		bot = sh.botCalls(calls)
		if len(bot) != 2 || bot[0].Method != "sendPhoto" || bot[0].Params["photo"] != "https://cdn.shop.example/blue.jpg" || bot[1].Params["text"] != "The blue one" {
			t.Fatalf("image bot calls = %+v", bot)
		}
		if len(image.Messages) != 2 || image.Message.ID != image.Messages[0].ID || image.Messages[0].Type != "image" ||
			image.Messages[0].Content != "https://cdn.shop.example/blue.jpg" || image.Messages[1].Content != "The blue one" {
			t.Fatalf("SendImage = %+v", image)
		}

		calls = len(sh.bot.Calls())
		carousel, err := c.SendCarousel(ctx, parley.SendCarouselRequest{
			ConversationID: adaConv, Ratio: "square",
			Elements: []parley.CarouselElement{
				{Title: "Blue shirt", Subtitle: "Cotton", ImageURL: "https://cdn.shop.example/blue.jpg", Buttons: []parley.Button{{Type: "postback", Title: "Add", Payload: "ADD_BLUE"}}},
				{Title: "Gift card"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		bot = sh.botCalls(calls)
		if len(bot) != 2 || bot[0].Method != "sendPhoto" || bot[0].Params["caption"] != "Blue shirt\nCotton" || bot[1].Method != "sendMessage" || bot[1].Params["text"] != "Gift card" {
			t.Fatalf("carousel bot calls = %+v", bot)
		}
		if carousel.Type != "carousel" || carousel.Metadata["ratio"] != "square" {
			t.Fatalf("SendCarousel = %+v", carousel)
		}

		// Refusals are typed, and comparable with the documented codes.
		calls = len(sh.bot.Calls())
		_, err = c.SendMessage(ctx, parley.SendMessageRequest{ConversationID: "0190a4e2-7c1d-7000-8000-000000000001", Text: "Hello?"})
		wantAPIError(t, "a send to an unknown conversation", err, parley.ErrConversationNotFound, http.StatusNotFound, x)
		_, err = c.SendMessage(ctx, parley.SendMessageRequest{ConversationID: adaConv, Text: "Pick", QuickReplies: []string{strings.Repeat("x", 21)}})
		wantAPIError(t, "a quick reply of 21 characters", err, parley.ErrInvalidRequest, http.StatusBadRequest, x)
		if errors.Is(err, parley.ErrConversationNotFound) {
			t.Fatal("invalid_request is conversation_not_found too")
		}
		if n := len(sh.bot.Calls()) - calls; n != 0 {
			t.Fatalf("refused sends reached Telegram %d times", n)
		}
	})

	t.Run("webhook", func(t *testing.T) {
		// A test event: its delivery, answered by the handler as *Test.
		d, err := c.TestWebhook(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event != "test" || d.Status != "delivered" || d.ResponseStatus == nil || *d.ResponseStatus != http.StatusNoContent && *d.ResponseStatus != http.StatusOK {
			t.Fatalf("TestWebhook = %+v", d)
		}
		hooks.await(t, "the test event", func(evs []*webhook.Event) bool {
			for _, ev := range evs {
				if tev, ok := ev.Data.(*webhook.Test); ok && ev.ID == d.ID && tev.WorkspaceID == sh.ws {
					return true
				}
			}
			return false
		})

		// The log: a page, then every delivery, the test event newest.
		page, err := c.ListDeliveries(ctx, parley.DeliveriesParams{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Deliveries) != 1 || page.Deliveries[0].ID != d.ID || page.NextBefore == nil {
			t.Fatalf("ListDeliveries(limit 1) = %+v", page)
		}
		var ids []string
		for del, err := range c.Deliveries(ctx, parley.DeliveriesParams{Event: "message.received", Limit: 4}) {
			if err != nil {
				t.Fatal(err)
			}
			if del.Status != "delivered" || del.Attempts != 1 {
				t.Fatalf("delivery = %+v", del)
			}
			ids = append(ids, del.ID)
		}
		if len(ids) != 6 || ids[len(ids)-1] != ada.ID {
			t.Fatalf("Deliveries(message.received) = %v, want the 6 messages, Ada's (%s) oldest", ids, ada.ID)
		}

		// A delivery sent again under its id (an SRE's replay) is
		// acknowledged, and not handled again.
		var out replayOutput
		sh.s.ctl(t, &out, "deliveries", "replay", "--workspace", sh.ws, "--delivery", ada.ID)
		wait.Until(t, 20*time.Second, "the replay of "+ada.ID, func() bool { return len(hooks.postsOf(ada.ID)) == 2 })
		for _, p := range hooks.postsOf(ada.ID) {
			if p.status/100 != 2 {
				t.Fatalf("post of %s answered %d", ada.ID, p.status)
			}
		}
		n := 0
		for _, ev := range hooks.events() {
			if ev.ID == ada.ID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("delivery %s handled %d times, want once", ada.ID, n)
		}

		// A forged delivery: 401, not handled.
		handled := len(hooks.events())
		body := []byte(`{"id":"0190a4e2-7c1d-7000-8000-00000000f0f0","event":"test","created_at":"2026-01-01T00:00:00Z","data":{}}`)
		req, _ := http.NewRequest(http.MethodPost, hooks.URL, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Service-Event", "test")
		req.Header.Set("X-Service-Delivery", "0190a4e2-7c1d-7000-8000-00000000f0f0")
		req.Header.Set("X-Service-Timestamp", fmt.Sprint(time.Now().Unix()))
		req.Header.Set("X-Service-Signature", "sha256="+strings.Repeat("0", 64))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(hooks.events()) != handled {
			t.Fatalf("a forged delivery: %d, handled %d events (was %d)", resp.StatusCode, len(hooks.events()), handled)
		}
	})

	t.Run("a send whose answer is lost", func(t *testing.T) {
		// The proxy forwards the send, the gateway sends and answers, and
		// the proxy hangs up instead of relaying the answer. The client
		// sends again with the same key and gets the first answer back.
		front := newGatewayFront(t, sh.s.gatewayURL)
		front.dropAnswer(http.MethodPost, "/v1/messages")
		fc, fx := sdkClientAt(front.URL, sh.key)
		calls := len(sh.bot.Calls())
		sent, err := fc.SendMessage(ctx, parley.SendMessageRequest{ConversationID: adaConv, Text: "Your parcel left today"})
		if err != nil {
			t.Fatalf("SendMessage through a connection dropped once: %v", err)
		}
		tries := fx.to(http.MethodPost, "/v1/messages")
		if len(tries) != 2 || tries[0].err == nil || tries[1].status != http.StatusCreated || !tries[1].replayed ||
			tries[0].idempotencyKey == "" || tries[1].idempotencyKey != tries[0].idempotencyKey {
			t.Fatalf("the client's tries: %+v; want a lost answer, then the replay under the same generated key", tries)
		}
		if fwd := front.forwarded(http.MethodPost, "/v1/messages"); len(fwd) != 2 {
			t.Fatalf("the gateway got %d sends, want 2", len(fwd))
		}
		sends := 0
		for _, call := range sh.botCalls(calls) {
			if call.Method == "sendMessage" && call.Params["text"] == "Your parcel left today" {
				sends++
			}
		}
		if sends != 1 || sent.Content != "Your parcel left today" {
			t.Fatalf("Telegram received %d sends, want 1; answer %+v", sends, sent)
		}
		t.Logf("lost answer: %d tries, key %s, replayed %v; Telegram sends: %d", len(tries), tries[0].idempotencyKey, tries[1].replayed, sends)
	})

	t.Run("a send while messaging is down", func(t *testing.T) {
		messaging := sh.s.procs["messaging"]
		messaging.kill(t)
		waitUnrouted(t, sh.s, "messaging")
		rc, rx := sh.s.sdkClient(t, sh.key, parley.WithRetry(parley.RetryPolicy{MaxAttempts: 30, MaxWait: time.Minute}))
		unavailable := rx.next(http.StatusServiceUnavailable)
		calls := len(sh.bot.Calls())
		done := callRefused(t, "a send while messaging is down", unavailable, func() (*parley.Message, error) {
			return rc.SendMessage(ctx, parley.SendMessageRequest{ConversationID: adaConv, Text: "Back in stock"})
		})
		restarted := time.Now()
		sh.s.procs["messaging"] = sh.s.restart(t, messaging)
		msg, err := awaitOutcome(t, "the send", done)
		if err != nil || msg.Content != "Back in stock" {
			t.Fatalf("the send after messaging came back: %+v %v", msg, err)
		}
		tries := rx.to(http.MethodPost, "/v1/messages")
		last := tries[len(tries)-1]
		if rx.count(http.StatusServiceUnavailable) < 1 || tries[0].status != http.StatusServiceUnavailable || last.status != http.StatusCreated {
			t.Fatalf("tries %+v; want 503s, then 201", tries)
		}
		for i := 1; i < len(tries); i++ {
			if w := waited(tries[i-1], tries[i]); w < time.Second {
				t.Fatalf("try %d came %s after a 503 with Retry-After: 1", i+1, w)
			}
		}
		for _, try := range tries {
			if try.idempotencyKey != tries[0].idempotencyKey {
				t.Fatalf("the retries changed the key: %+v", tries)
			}
		}
		sends := 0
		for _, call := range sh.botCalls(calls) {
			if call.Params["text"] == "Back in stock" {
				sends++
			}
		}
		if sends != 1 {
			t.Fatalf("Telegram received %d sends, want 1", sends)
		}
		t.Logf("messaging down: %d tries, %d answered 503, waited %s after the first, sent %s after the restart began", len(tries), rx.count(http.StatusServiceUnavailable),
			waited(tries[0], tries[1]).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	})

	t.Run("delete the webhook", func(t *testing.T) {
		if err := c.DeleteWebhook(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := c.Webhook(ctx)
		wantAPIError(t, "the webhook after DeleteWebhook", err, parley.ErrWebhookNotFound, http.StatusNotFound, x)
	})
}

// TestClientAgainstMeta: on Messenger, a send with quick replies, typing,
// Meta's window refusal as a typed 409, and a page comment read, answered
// publicly and privately, through the client.
func TestClientAgainstMeta(t *testing.T) {
	t.Parallel()
	const page, psid = "104880101", "6843201900000101"
	sh := startCommentShop(t)
	sh.graph.SetProfile(psid, metafake.Profile{FirstName: "Ada", LastName: "Lovelace"})
	channelID := sh.channel(t, "messenger", page, "external")
	ctx := sdkContext(t)
	c, x := sh.sdkClient(t, sh.key)

	sh.deliver(t, metaPost("page", page, metaMessage(page, psid, time.Now().Add(-time.Minute), map[string]any{"mid": "m_sdk_1", "text": "Is the blue jacket in stock?"})))
	var ev customerEvent
	if err := json.Unmarshal(sh.rcv.WaitFor(t, "message.received").Body, &ev); err != nil {
		t.Fatal(err)
	}
	conv := ev.Data.ConversationID

	sent, err := c.SendMessage(ctx, parley.SendMessageRequest{ConversationID: conv, Text: "Which size?", QuickReplies: []string{"Size M", "Size L"}})
	if err != nil {
		t.Fatal(err)
	}
	sends := sh.graph.CallsTo("/me/messages")
	wantSame(t, "quick replies send", sends[len(sends)-1].Body, map[string]any{
		"message": map[string]any{"quick_replies": []any{
			map[string]any{"content_type": "text", "payload": "Size M", "title": "Size M"},
			map[string]any{"content_type": "text", "payload": "Size L", "title": "Size L"},
		}, "text": "Which size?"},
		"messaging_type": "RESPONSE",
		"recipient":      map[string]any{"id": psid},
	})
	if sent.Sender != "user" || !strings.HasPrefix(sent.ExternalID, "m_fake_") || sent.ConversationID != conv {
		t.Fatalf("SendMessage = %+v", sent)
	}
	if err := c.SendTyping(ctx, conv); err != nil {
		t.Fatal(err)
	}
	sends = sh.graph.CallsTo("/me/messages")
	wantSame(t, "typing", sends[len(sends)-1].Body, map[string]any{"recipient": map[string]any{"id": psid}, "sender_action": "typing_on"})

	// Meta refuses: outside the 24-hour window.
	sh.graph.FailNext("/me/messages", metafake.OutsideWindow())
	_, err = c.SendMessage(ctx, parley.SendMessageRequest{ConversationID: conv, Text: "Hello?"})
	apiErr := wantAPIError(t, "a send outside the window", err, parley.ErrOutsideMessagingWindow, http.StatusConflict, x)
	if apiErr.Code != "outside_messaging_window" || apiErr.RetryAfter != 0 {
		t.Fatalf("outside the window: %+v", apiErr)
	}

	// A comment on the page: read, replied to, answered privately.
	cid := page + "_902"
	sh.deliver(t, feedComment(page, cid, psid, "Ada Lovelace", "Do you ship to Darkhan?", time.Now().Add(-10*time.Minute)))
	sh.waitComment(t, cid)
	comment, err := c.Comment(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if comment.ID != cid || comment.PostID != page+"_104" || comment.Text != "Do you ship to Darkhan?" || comment.From.ID != psid ||
		comment.From.Name != "Ada Lovelace" || comment.Platform != "messenger" || comment.ChannelID != channelID || comment.Status != "received" {
		t.Fatalf("Comment = %+v", comment)
	}
	reply, err := c.ReplyToComment(ctx, cid, "Yes! Check your inbox.")
	if err != nil {
		t.Fatal(err)
	}
	replies := sh.graph.CallsTo("/" + cid + "/comments")
	if len(replies) != 1 || replies[0].Body["message"] != "Yes! Check your inbox." || reply.ExternalID == "" || reply.Comment.Status != "replied" {
		t.Fatalf("ReplyToComment = %+v; meta's comment replies %+v", reply, replies)
	}
	dm, err := c.PrivateReply(ctx, cid, "Hi Ada! We ship to Darkhan in 2 days.")
	if err != nil {
		t.Fatal(err)
	}
	sends = sh.graph.CallsTo("/me/messages")
	wantSame(t, "private reply", sends[len(sends)-1].Body, map[string]any{
		"message":   map[string]any{"text": "Hi Ada! We ship to Darkhan in 2 days."},
		"recipient": map[string]any{"comment_id": cid},
	})
	if dm.RecipientID == "" || dm.ExternalID == "" || dm.ConversationID == "" || dm.Comment.Status != "both_sent" {
		t.Fatalf("PrivateReply = %+v", dm)
	}
	_, err = c.PrivateReply(ctx, cid, "again")
	wantAPIError(t, "a second private reply", err, parley.ErrPrivateReplyUsed, http.StatusConflict, x)
	_, err = c.Comment(ctx, page+"_404")
	wantAPIError(t, "an unknown comment", err, parley.ErrCommentNotFound, http.StatusNotFound, x)
}
