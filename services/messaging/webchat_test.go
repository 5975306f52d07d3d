package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
)

// --- the widget's side ---

// webchatChannel creates a webchat channel in ws in mode.
func (h *harness) webchatChannel(ws, mode string) messagingapi.AdminChannel {
	h.t.Helper()
	var out messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "webchat"}, &out); err != nil {
		h.t.Fatalf("create webchat channel: %v", err)
	}
	if mode != "auto" {
		h.setMode(out.Channel.ID, mode)
		out.Channel.AIMode = mode
	}
	return out.Channel
}

type widgetResp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r widgetResp) json(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return out
}

func widgetCall(t *testing.T, method, url, token, body string) widgetResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Visitor-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return widgetResp{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// newVisitor starts a widget session and returns the token and visitor id.
func newVisitor(t *testing.T, base, channelID string) (token, visitorID string) {
	t.Helper()
	r := widgetCall(t, http.MethodPost, base+"/webchat/"+channelID+"/session", "", "")
	if r.Status != http.StatusCreated {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	s := apicheck.Body[messagingapi.WebchatSession](t, r.Body)
	if s.VisitorToken == "" || s.VisitorID == "" || s.ExpiresAt == "" {
		t.Fatalf("session body %s", r.Body)
	}
	return s.VisitorToken, s.VisitorID
}

func say(t *testing.T, base, channelID, token string, body map[string]any) widgetResp {
	t.Helper()
	b, _ := json.Marshal(body)
	return widgetCall(t, http.MethodPost, base+"/webchat/"+channelID+"/messages", token, string(b))
}

func wantWidgetErr(t *testing.T, r widgetResp, status int, code, messagePart string) {
	t.Helper()
	c, m := errorBody(t, r.Body)
	if r.Status != status || c != code || !strings.Contains(m, messagePart) {
		t.Fatalf("got %d %s %q, want %d %s containing %q", r.Status, c, m, status, code, messagePart)
	}
}

// sseStream is a widget's open event stream.
type sseStream struct {
	events chan sseEvent
	cancel context.CancelFunc
}

// sseEvent is an event, or a comment line with no Name.
type sseEvent = sse.Event

// openStream connects to the events route and waits for "ready".
func openStream(t *testing.T, base, channelID, token string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/webchat/"+channelID+"/events", nil)
	req.Header.Set("X-Visitor-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	s := &sseStream{events: make(chan sseEvent, 100), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			s.events <- ev
		}
	}()
	if ev := s.next(t, "ready"); ev.Data != "{}" {
		t.Fatalf("ready data = %q", ev.Data)
	}
	return s
}

// next returns the next event named name, skipping pings.
func (s *sseStream) next(t *testing.T, name string) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended waiting for %q", name)
			}
			if ev.Name == "" && name != "" {
				continue
			}
			if ev.Name != name {
				t.Fatalf("got event %q %s, want %q", ev.Name, ev.Data, name)
			}
			return ev
		case <-timeout:
			t.Fatalf("no %q event within 5s", name)
		}
	}
}

func decodeWidgetMessage(t *testing.T, data string) messagingapi.WebchatMessage {
	t.Helper()
	return apicheck.Body[messagingapi.WebchatMessage](t, []byte(data))
}

func history(t *testing.T, base, channelID, token string) []messagingapi.WebchatMessage {
	t.Helper()
	r := widgetCall(t, http.MethodGet, base+"/webchat/"+channelID+"/history", token, "")
	if r.Status != http.StatusOK {
		t.Fatalf("history: %d %s", r.Status, r.Body)
	}
	return apicheck.Body[messagingapi.WebchatHistory](t, r.Body).Messages
}

// outboxEvents decodes the customer events written, oldest first.
func (h *harness) outboxEvents() []*eventsv1.Event {
	h.t.Helper()
	var payloads [][]byte
	for _, w := range h.written() {
		if strings.HasPrefix(w.subject, h.env.Stream.SubjectPrefix+".") {
			payloads = append(payloads, w.payload)
		}
	}
	out := make([]*eventsv1.Event, len(payloads))
	for i, p := range payloads {
		out[i] = &eventsv1.Event{}
		if err := proto.Unmarshal(p, out[i]); err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

// --- tests ---

func TestWebchatPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "auto")
	tg := h.telegramChannel(ws, "auto")
	base := h.base

	r := widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID, "", "")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	page := string(r.Body)
	if !strings.Contains(page, `data-channel="`+ch.ID+`"`) {
		t.Fatal("page does not name its channel")
	}
	// Self-contained: no external script, stylesheet or font.
	if regexp.MustCompile(`(?i)<script[^>]+src=|<link[^>]+stylesheet|@import|url\(http`).MatchString(page) {
		t.Fatal("page loads external assets")
	}
	// The CSP allows exactly the inline script and style, by hash.
	csp := r.Header.Get("Content-Security-Policy")
	script := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(page)
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(page)
	if script == nil || style == nil {
		t.Fatal("page has no inline script or style")
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	for _, want := range []string{
		"default-src 'none'", "script-src " + hash(script[1]), "style-src " + hash(style[1]),
		"img-src https: data:", "connect-src 'self'", "base-uri 'none'", "frame-ancestors *",
	} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows unsafe sources: %q", csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers: %v", r.Header)
	}

	// No webchat channel there: a page a person can read, 404.
	for _, id := range []string{uuid.NewString(), tg.ID, "not-a-uuid"} {
		r := widgetCall(t, http.MethodGet, base+"/webchat/"+id, "", "")
		if r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), "This chat is not available") {
			t.Errorf("page of %s: %d %s", id, r.Status, r.Body)
		}
	}

	// The launcher script.
	r = widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/embed.js", "", "")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		r.Header.Get("Cross-Origin-Resource-Policy") != "cross-origin" || !strings.Contains(string(r.Body), "iframe") {
		t.Fatalf("embed.js: %d %v", r.Status, r.Header)
	}
	r = widgetCall(t, http.MethodGet, base+"/webchat/"+tg.ID+"/embed.js", "", "")
	wantWidgetErr(t, r, http.StatusNotFound, "channel_not_found", "webchat channel")
}

func TestWebchatFrameAncestorsSetting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatFrameAncestors = "https://shop.example 'self'" })
	ch := h.webchatChannel(uuid.NewString(), "auto")
	r := widgetCall(t, http.MethodGet, h.base+"/webchat/"+ch.ID, "", "")
	if csp := r.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "frame-ancestors https://shop.example 'self'") {
		t.Fatalf("CSP = %q", csp)
	}
}

func TestWebchatSessionAndToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "auto")
	other := h.webchatChannel(ws, "auto")
	tg := h.telegramChannel(ws, "auto")
	base := h.base

	token, visitorID := newVisitor(t, base, ch.ID)
	if _, err := uuid.Parse(visitorID); err != nil || !strings.HasPrefix(token, visitorID+".") {
		t.Fatalf("token %q of visitor %q", token, visitorID)
	}
	if got := history(t, base, ch.ID, token); len(got) != 0 {
		t.Fatalf("history of a new visitor = %+v", got)
	}
	token2, visitor2 := newVisitor(t, base, ch.ID)
	if visitor2 == visitorID || token2 == token {
		t.Fatal("two sessions got the same visitor")
	}

	// 401 for a token that is missing, forged or of another channel, on
	// every route that needs one.
	otherToken, _ := newVisitor(t, base, other.ID)
	forged := visitorID + "." + strings.Repeat("A", 43)
	swapped := visitor2 + token[strings.Index(token, "."):]
	for name, bad := range map[string]string{"missing": "", "forged": forged, "other visitor's signature": swapped,
		"other channel": otherToken, "garbage": "x.y", "upper-case id": strings.ToUpper(visitorID) + token[strings.Index(token, "."):]} {
		t.Run(name, func(t *testing.T) {
			r := widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history", bad, "")
			wantWidgetErr(t, r, http.StatusUnauthorized, "unauthorized", "X-Visitor-Token")
			r = say(t, base, ch.ID, bad, map[string]any{"text": "hi"})
			wantWidgetErr(t, r, http.StatusUnauthorized, "unauthorized", "")
			r = widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/postbacks", bad, `{"payload":"X"}`)
			wantWidgetErr(t, r, http.StatusUnauthorized, "unauthorized", "")
			r = widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", bad, "")
			wantWidgetErr(t, r, http.StatusUnauthorized, "unauthorized", "")
		})
	}
	if n := h.count("messages", ""); n != 0 {
		t.Fatalf("%d messages stored by unauthenticated posts", n)
	}

	// 404 channel_not_found for channels that are not webchat ones.
	for _, id := range []string{uuid.NewString(), tg.ID, "nope"} {
		for _, r := range []widgetResp{
			widgetCall(t, http.MethodPost, base+"/webchat/"+id+"/session", "", ""),
			say(t, base, id, token, map[string]any{"text": "hi"}),
			widgetCall(t, http.MethodGet, base+"/webchat/"+id+"/history", token, ""),
			widgetCall(t, http.MethodGet, base+"/webchat/"+id+"/events", token, ""),
			widgetCall(t, http.MethodPost, base+"/webchat/"+id+"/postbacks", token, `{"payload":"X"}`),
		} {
			wantWidgetErr(t, r, http.StatusNotFound, "channel_not_found", "webchat channel")
		}
	}

	// A new channel secret ends the channel's sessions, once the
	// instance reads the channel again: changed behind its back (here in
	// the database; in production through another instance), within
	// ChannelMaxAge.
	if err := h.db.Exec(`UPDATE messaging.channels SET secret = 'rotated' WHERE id = ?`, ch.ID).Error; err != nil {
		t.Fatal(err)
	}
	wait.Until(t, adapters.ChannelMaxAge+time.Second, "the rotated secret to apply", func() bool {
		return widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history", token, "").Status == http.StatusUnauthorized
	})
	wantWidgetErr(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history", token, ""), http.StatusUnauthorized, "unauthorized", "")
}

func TestWebchatVisitorMessageStoredOncePerClientID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "external")
	base := h.base
	token, visitorID := newVisitor(t, base, ch.ID)

	body := map[string]any{"text": "Do you ship to Ulaanbaatar?", "client_message_id": "c-1"}
	first := say(t, base, ch.ID, token, body)
	if first.Status != http.StatusCreated {
		t.Fatalf("first post: %d %s", first.Status, first.Body)
	}
	got := first.json(t)
	msg := got["message"].(map[string]any)
	if got["duplicate"] != false || msg["id"] != "c-1" || msg["sender"] != "contact" || msg["type"] != "text" || msg["text"] != body["text"] {
		t.Fatalf("first answer = %v", got)
	}
	// The widget retries (a lost answer): stored once, nothing forwarded twice.
	again := say(t, base, ch.ID, token, body)
	if again.Status != http.StatusOK || again.json(t)["duplicate"] != true {
		t.Fatalf("retry: %d %s", again.Status, again.Body)
	}
	if n := h.count("messages", ""); n != 1 {
		t.Fatalf("messages = %d, want 1", n)
	}

	// Another visitor may use the same client id: ids are per visitor.
	token2, visitor2 := newVisitor(t, base, ch.ID)
	if r := say(t, base, ch.ID, token2, map[string]any{"text": "me too", "client_message_id": "c-1", "name": "  Ada  "}); r.Status != http.StatusCreated {
		t.Fatalf("second visitor: %d %s", r.Status, r.Body)
	}
	// Without a client id the server makes one.
	if r := say(t, base, ch.ID, token, map[string]any{"text": "hello?"}); r.Status != http.StatusCreated {
		t.Fatalf("no client id: %d %s", r.Status, r.Body)
	} else if id := r.json(t)["message"].(map[string]any)["id"].(string); id == "" || id == "c-1" {
		t.Fatalf("generated id = %q", id)
	}

	// The inbox: one conversation per visitor, the visitor id as sender_id.
	convs := h.conversations(ws, "?platform=webchat").Conversations
	if len(convs) != 2 {
		t.Fatalf("conversations = %+v", convs)
	}
	byVisitor := map[string]messagingapi.Conversation{}
	for _, c := range convs {
		byVisitor[c.Contact.SenderID] = c
	}
	c1, c2 := byVisitor[visitorID], byVisitor[visitor2]
	if c1.ID == "" || c1.Platform != "webchat" || c1.ChannelID != ch.ID || c1.Contact.Name != "Visitor "+visitorID[len(visitorID)-4:] {
		t.Fatalf("first visitor's conversation = %+v", c1)
	}
	if c2.Contact.Name != "Ada" {
		t.Fatalf("named visitor = %+v", c2.Contact)
	}
	msgs := h.messages(ws, c1.ID, "").Messages
	if len(msgs) != 2 || msgs[1].Content != body["text"] || msgs[1].ExternalID != "c-1" || msgs[1].Sender != "contact" || msgs[1].Type != "text" {
		t.Fatalf("messages = %+v", msgs)
	}

	// External mode: one message.received per stored message, with every field.
	events := h.outboxEvents()
	if len(events) != 3 {
		t.Fatalf("outbox holds %d events, want 3", len(events))
	}
	ev := events[0]
	d := ev.GetMessageReceived()
	if ev.GetType() != "message.received" || d == nil || d.GetPlatform() != "webchat" || d.GetConversationId() != c1.ID ||
		d.GetWorkspaceId() != ws || d.GetChannel().GetKind() != "webchat" {
		t.Fatalf("event = %v", ev)
	}
	if c := d.GetContact(); c.GetId() != c1.Contact.ID || c.GetSenderId() != visitorID || c.GetName() != c1.Contact.Name {
		t.Fatalf("event contact = %v", c)
	}
	if m := d.GetMessage(); m.GetText() != body["text"] || m.GetType() != "text" || m.GetExternalId() != "c-1" || m.GetId() != msgs[1].ID || m.GetAttachment() != nil {
		t.Fatalf("event message = %v", m)
	}
}

func TestWebchatQuickReplyAndAutoMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "auto")
	base := h.base
	token, _ := newVisitor(t, base, ch.ID)
	if r := say(t, base, ch.ID, token, map[string]any{"text": "Yes", "quick_reply_payload": "Yes"}); r.Status != http.StatusCreated {
		t.Fatalf("quick reply: %d %s", r.Status, r.Body)
	}
	conv := h.conversations(ws, "").Conversations[0]
	m := h.messages(ws, conv.ID, "").Messages[0]
	if m.Content != "Yes" || m.Metadata["quick_reply_payload"] != "Yes" {
		t.Fatalf("stored = %+v", m)
	}
	// auto mode keeps the inbox and forwards nothing: the built-in AI
	// answers it.
	if n := h.eventRows(); n != 0 {
		t.Fatalf("events = %d for an auto channel", n)
	}
	if n := h.turnRows(); n != 1 {
		t.Fatalf("chat turns = %d for an auto channel's message, want 1", n)
	}
}

func TestWebchatRejectsBadMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatMessagesPerMinute = 1000 })
	ch := h.webchatChannel(uuid.NewString(), "external")
	base := h.base
	token, _ := newVisitor(t, base, ch.ID)

	tests := []struct {
		name    string
		body    string
		status  int
		code    string
		message string
	}{
		{"no text", `{}`, 400, "invalid_request", "text is required"},
		{"blank text", `{"text":" \n\t "}`, 400, "invalid_request", "text is required"},
		{"text too long", `{"text":"` + strings.Repeat("é", 4097) + `"}`, 400, "invalid_request", "text must be at most 4096 characters"},
		{"text wrong type", `{"text":5}`, 400, "invalid_request", "text must be a string"},
		{"not json", `{"text":`, 400, "invalid_request", "not valid JSON"},
		{"bad client id", `{"text":"hi","client_message_id":"a b"}`, 400, "invalid_request", "client_message_id"},
		{"long client id", `{"text":"hi","client_message_id":"` + strings.Repeat("a", 65) + `"}`, 400, "invalid_request", "client_message_id"},
		{"long name", `{"text":"hi","name":"` + strings.Repeat("n", 81) + `"}`, 400, "invalid_request", "name must be at most 80"},
		{"control in name", `{"text":"hi","name":"a\u0001b"}`, 400, "invalid_request", "name must not contain control"},
		{"NUL in text", `{"text":"a\u0000b"}`, 400, "invalid_request", "NUL character"},
		{"NUL in quick reply", `{"text":"hi","quick_reply_payload":"q\u0000"}`, 400, "invalid_request", "NUL character"},
		{"long quick reply", `{"text":"hi","quick_reply_payload":"` + strings.Repeat("q", 21) + `"}`, 400, "invalid_request", "quick_reply_payload"},
		{"body too large", `{"text":"hi","pad":"` + strings.Repeat("x", 33<<10) + `"}`, 413, "payload_too_large", "at most 32768 bytes"},
	}
	for _, tt := range tests {
		r := widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/messages", token, tt.body)
		if c, m := errorBody(t, r.Body); r.Status != tt.status || c != tt.code || !strings.Contains(m, tt.message) {
			t.Errorf("%s: %d %s %q, want %d %s %q", tt.name, r.Status, c, m, tt.status, tt.code, tt.message)
		}
	}
	// The longest text is taken.
	if r := say(t, base, ch.ID, token, map[string]any{"text": strings.Repeat("\u00e9", 4096)}); r.Status != http.StatusCreated {
		t.Fatalf("4096 characters: %d %s", r.Status, r.Body)
	}
	if n := h.count("messages", ""); n != 1 {
		t.Fatalf("messages = %d, want only the valid one", n)
	}
	// history's limit is checked.
	r := widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history?limit=101", token, "")
	wantWidgetErr(t, r, http.StatusBadRequest, "invalid_request", "limit")
}

func TestWebchatRateLimitPerVisitor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatMessagesPerMinute = 3 })
	ch := h.webchatChannel(uuid.NewString(), "auto")
	base := h.base
	token, _ := newVisitor(t, base, ch.ID)
	for i := 0; i < 3; i++ {
		if r := say(t, base, ch.ID, token, map[string]any{"text": "flood"}); r.Status != http.StatusCreated {
			t.Fatalf("message %d: %d %s", i, r.Status, r.Body)
		}
	}
	r := say(t, base, ch.ID, token, map[string]any{"text": "flood"})
	wantWidgetErr(t, r, http.StatusTooManyRequests, "rate_limited", "at most 3 messages per minute")
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	if n := h.count("messages", ""); n != 3 {
		t.Fatalf("messages = %d, want 3", n)
	}
	ingress := func(outcome string) float64 {
		return h.metric("parley_messaging_ingress_updates_total", "platform", "webchat", "outcome", outcome)
	}
	if ingress("stored") != 3 || ingress("rate_limited") != 1 {
		t.Fatalf("ingress metrics: stored %v, rate_limited %v", ingress("stored"), ingress("rate_limited"))
	}
	// Another visitor has their own count.
	token2, _ := newVisitor(t, base, ch.ID)
	if r := say(t, base, ch.ID, token2, map[string]any{"text": "hi"}); r.Status != http.StatusCreated {
		t.Fatalf("other visitor: %d %s", r.Status, r.Body)
	}
}

// secondInstance runs another messaging instance on the same database,
// Redis and NATS server, with connections and a listener of its own, as a
// second process would. It serves the rpc endpoints too, in the same
// queue group: a call reaches either instance.
func (h *harness) secondInstance() *instance {
	h.t.Helper()
	return h.instanceWithRedis(h.cfg.RedisURL)
}

// instanceWithRedis is secondInstance reaching Redis at redisURL (a proxy
// a test cuts).
func (h *harness) instanceWithRedis(redisURL string) *instance {
	h.t.Helper()
	cfg := h.cfg
	cfg.Addr, cfg.RedisURL = ports.FreeAddr(h.t), redisURL
	return startInstance(h.t, h.env, cfg)
}

func TestWebchatRepliesReachTheWidgetThroughAnotherInstance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.SSEPingInterval = 50 * time.Millisecond })
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "external")
	// The visitor writes through instance B, and has a tab open on each
	// instance. Both serve the rpc api, in one queue group: whichever
	// instance sends a reply, one of the tabs is on the other, and every
	// reply must reach both.
	b := h.secondInstance()
	widgetB := b.base
	token, visitorID := newVisitor(t, widgetB, ch.ID)
	if r := say(t, widgetB, ch.ID, token, map[string]any{"text": "Is the blue one in stock?", "client_message_id": "q1"}); r.Status != http.StatusCreated {
		t.Fatalf("say: %d %s", r.Status, r.Body)
	}
	conv := h.conversations(ws, "").Conversations[0]
	if conv.Contact.SenderID != visitorID {
		t.Fatalf("conversation = %+v", conv)
	}

	// A reply while no widget is open is stored and shows in the history.
	var out messagingapi.MessageSent
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "Let me check."}, &out); err != nil {
		t.Fatalf("send: %v", err)
	}
	if _, err := uuid.Parse(out.Message.ExternalID); err != nil || out.Message.Sender != "user" {
		t.Fatalf("sent = %+v", out.Message)
	}

	stream := openStream(t, widgetB, ch.ID, token)
	tab2 := openStream(t, h.base, ch.ID, token)

	// Keep-alives.
	select {
	case ev := <-stream.events:
		if ev.Name != "" || ev.Comment != "ping" {
			t.Fatalf("first event after ready = %+v, want a ping", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no ping")
	}

	if err := h.api(ws, http.MethodPost, "/v1/typing", map[string]any{"conversation_id": conv.ID}, nil); err != nil {
		t.Fatalf("typing: %v", err)
	}
	if ev := stream.next(t, "typing"); ev.Data != "{}" {
		t.Fatalf("typing = %+v", ev)
	}
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{
		"conversation_id": conv.ID, "text": "Yes! Want it?", "quick_replies": []string{"Yes please", "No thanks"},
	}, &out); err != nil {
		t.Fatalf("send: %v", err)
	}
	m := decodeWidgetMessage(t, stream.next(t, "message").Data)
	if m.ID != out.Message.ExternalID || m.Sender != "user" || m.Type != "text" || m.Text != "Yes! Want it?" ||
		strings.Join(m.QuickReplies, "|") != "Yes please|No thanks" || m.CreatedAt == "" {
		t.Fatalf("pushed = %+v", m)
	}
	if err := h.api(ws, http.MethodPost, "/v1/image", map[string]any{
		"conversation_id": conv.ID, "image_url": "https://cdn.example/blue.jpg", "text": "Here it is",
	}, nil); err != nil {
		t.Fatalf("image: %v", err)
	}
	if m := decodeWidgetMessage(t, stream.next(t, "message").Data); m.Type != "image" || m.ImageURL != "https://cdn.example/blue.jpg" {
		t.Fatalf("image pushed = %+v", m)
	}
	if m := decodeWidgetMessage(t, stream.next(t, "message").Data); m.Type != "text" || m.Text != "Here it is" {
		t.Fatalf("image text pushed = %+v", m)
	}
	if err := h.api(ws, http.MethodPost, "/v1/carousel", map[string]any{
		"conversation_id": conv.ID, "ratio": "square", "elements": []map[string]any{
			{"title": "Blue", "subtitle": "$20", "image_url": "https://cdn.example/b.jpg", "buttons": []map[string]any{
				{"type": "postback", "title": "Buy", "payload": "BUY_BLUE"}, {"type": "web_url", "title": "Details", "url": "https://shop.example/blue"},
			}},
			{"title": "Red"},
		},
	}, nil); err != nil {
		t.Fatalf("carousel: %v", err)
	}
	c := decodeWidgetMessage(t, stream.next(t, "message").Data)
	if c.Type != "carousel" || c.Ratio != "square" || len(c.Cards) != 2 || c.Cards[0].Title != "Blue" || c.Cards[0].Subtitle != "$20" ||
		c.Cards[0].ImageURL != "https://cdn.example/b.jpg" || len(c.Cards[0].Buttons) != 2 || c.Cards[0].Buttons[0].Payload != "BUY_BLUE" || c.Cards[1].Title != "Red" {
		t.Fatalf("carousel pushed = %+v", c)
	}
	// Every open tab got the same.
	for _, want := range []string{"typing", "message", "message", "message", "message"} {
		tab2.next(t, want)
	}

	// The visitor's own message shows in their other tabs.
	if r := say(t, widgetB, ch.ID, token, map[string]any{"text": "Buy the blue one", "client_message_id": "q2"}); r.Status != http.StatusCreated {
		t.Fatalf("say: %d %s", r.Status, r.Body)
	}
	if m := decodeWidgetMessage(t, tab2.next(t, "message").Data); m.ID != "q2" || m.Sender != "contact" || m.Text != "Buy the blue one" {
		t.Fatalf("echo = %+v", m)
	}

	// The history holds the thread, oldest first, in the pushed shapes,
	// from either instance.
	for _, base := range []string{widgetB, h.base} {
		hist := history(t, base, ch.ID, token)
		var got []string
		for _, m := range hist {
			got = append(got, m.Sender+":"+m.Type+":"+m.ID)
		}
		if len(hist) != 7 || hist[0].ID != "q1" || hist[1].Text != "Let me check." || hist[2].ID != m.ID ||
			strings.Join(hist[2].QuickReplies, "|") != "Yes please|No thanks" || hist[3].ImageURL != "https://cdn.example/blue.jpg" ||
			hist[5].ID != c.ID || hist[5].Ratio != "square" || len(hist[5].Cards[0].Buttons) != 2 || hist[6].ID != "q2" {
			t.Fatalf("history = %v\n%+v", got, hist)
		}
	}
	// Another visitor's stream hears nothing of this conversation.
	otherToken, _ := newVisitor(t, widgetB, ch.ID)
	other := openStream(t, widgetB, ch.ID, otherToken)
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "private"}, nil); err != nil {
		t.Fatal(err)
	}
	stream.next(t, "message")
	deadline := time.After(300 * time.Millisecond)
	for done := false; !done; {
		select {
		case ev := <-other.events:
			if ev.Name != "" {
				t.Fatalf("another visitor got %+v", ev)
			}
		case <-deadline:
			done = true
		}
	}
	if onA, onB := h.streams(), b.streams(); onA != 1 || onB != 2 {
		t.Fatalf("instance A holds %d streams and B %d, want 1 (the second tab) and 2", onA, onB)
	}
}

func TestWebchatPostbacks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "external")
	base := h.base
	token, visitorID := newVisitor(t, base, ch.ID)
	tap := func(body string) widgetResp {
		return widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/postbacks", token, body)
	}

	// Before any button was sent, no payload is genuine.
	wantWidgetErr(t, tap(`{"payload":"BUY"}`), http.StatusBadRequest, "invalid_request", "payload is not the payload of a postback button")

	say(t, base, ch.ID, token, map[string]any{"text": "hi"})
	conv := h.conversations(ws, "").Conversations[0]
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "Choose", "buttons": []map[string]any{
		{"type": "postback", "title": "Talk to a human", "payload": "HUMAN"},
		{"type": "web_url", "title": "FAQ", "url": "https://shop.example/faq"},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.api(ws, http.MethodPost, "/v1/carousel", map[string]any{"conversation_id": conv.ID, "elements": []map[string]any{
		{"title": "Blue", "buttons": []map[string]any{{"type": "postback", "title": "Buy blue", "payload": "BUY_BLUE"}}},
	}}, nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"no payload", `{}`, 400, "invalid_request", "payload is required"},
		{"unknown payload", `{"payload":"FREE_STUFF","title":"Free stuff"}`, 400, "invalid_request", "payload is not the payload"},
		{"a web_url's address", `{"payload":"https://shop.example/faq"}`, 400, "invalid_request", "payload is not the payload"},
		{"long payload", `{"payload":"` + strings.Repeat("p", 1001) + `"}`, 400, "invalid_request", "payload must be at most 1000"},
		{"too large", `{"payload":"` + strings.Repeat("p", 9<<10) + `"}`, 413, "payload_too_large", "at most 8192 bytes"},
	}
	for _, tt := range tests {
		r := tap(tt.body)
		if c, m := errorBody(t, r.Body); r.Status != tt.status || c != tt.code || !strings.Contains(m, tt.msg) {
			t.Errorf("%s: %d %s %q", tt.name, r.Status, c, m)
		}
	}

	// A genuine tap: the button's own title, whatever the widget says.
	r := tap(`{"payload":"HUMAN","title":"something else","client_message_id":"tap-1"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("tap: %d %s", r.Status, r.Body)
	}
	if m := r.json(t)["message"].(map[string]any); m["type"] != "postback" || m["text"] != "Talk to a human" || m["id"] != "tap-1" {
		t.Fatalf("tap answer = %v", m)
	}
	if r := tap(`{"payload":"HUMAN","client_message_id":"tap-1"}`); r.Status != http.StatusOK || r.json(t)["duplicate"] != true {
		t.Fatalf("repeated tap: %d %s", r.Status, r.Body)
	}
	if r := tap(`{"payload":"BUY_BLUE"}`); r.Status != http.StatusCreated {
		t.Fatalf("card tap: %d %s", r.Status, r.Body)
	}

	msgs := h.messages(ws, conv.ID, "").Messages
	if len(msgs) != 5 || msgs[1].Type != "postback" || msgs[1].Content != "Talk to a human" || msgs[1].Metadata["payload"] != "HUMAN" || msgs[0].Metadata["payload"] != "BUY_BLUE" {
		t.Fatalf("messages = %+v", msgs)
	}
	var postbacks []*eventsv1.PostbackReceived
	for _, ev := range h.outboxEvents() {
		if ev.GetType() == "postback.received" {
			postbacks = append(postbacks, ev.GetPostbackReceived())
		}
	}
	if len(postbacks) != 2 {
		t.Fatalf("postback events = %d, want 2", len(postbacks))
	}
	p := postbacks[0]
	if p.GetPostback().GetPayload() != "HUMAN" || p.GetPostback().GetReceivedAt() == nil || p.GetPlatform() != "webchat" ||
		p.GetConversationId() != conv.ID || p.GetContact().GetSenderId() != visitorID || p.GetMessage().GetText() != "Talk to a human" ||
		p.GetMessage().GetType() != "postback" {
		t.Fatalf("postback event = %v", p)
	}
}

func TestWebchatStreamLimitsAndShutdown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatStreamsPerVisitor = 2; c.WebchatMaxStreams = 3 })
	ch := h.webchatChannel(uuid.NewString(), "auto")
	base := h.base
	token, _ := newVisitor(t, base, ch.ID)
	first := openStream(t, base, ch.ID, token)
	openStream(t, base, ch.ID, token)
	wantLimited(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", token, ""), "too many open chat windows", 5)

	// A closed tab frees its place.
	first.cancel()
	wait.Until(t, 2*time.Second, "the closed stream's place", func() bool { return h.streams() == 1 })
	openStream(t, base, ch.ID, token)

	// The instance's own bound.
	other, _ := newVisitor(t, base, ch.ID)
	last := openStream(t, base, ch.ID, other)
	third, _ := newVisitor(t, base, ch.ID)
	wantLimited(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", third, ""), "on this server", 5)

	// Shutdown ends every stream, so that the server's graceful stop does
	// not wait on them (stop fails the test when the instance does not
	// stop cleanly), and takes no new one. (A stream asked for while the
	// instance stops is refused with 503: TestStreamRefusals.)
	h.stop()
	for {
		select {
		case _, ok := <-last.events:
			if ok {
				continue
			}
		case <-time.After(2 * time.Second):
			t.Fatal("stream still open after the instance stopped")
		}
		break
	}
	if resp, err := http.Get(base + "/webchat/" + ch.ID); err == nil {
		resp.Body.Close()
		t.Fatalf("a stopped instance answered %d", resp.StatusCode)
	}
}

func TestWebchatWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	n := startEmbeddedNATS(t)
	h := newHarness(t, withNATS(n.url()))
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "external")
	base := h.base
	token, _ := newVisitor(t, base, ch.ID)

	n.stop()
	// Live updates need NATS: the widget is told to retry.
	r := widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", token, "")
	wantWidgetErr(t, r, http.StatusServiceUnavailable, "service_unavailable", "retry")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if got := h.streams(); got != 0 {
		t.Fatalf("a refused stream holds a place: %d", got)
	}
	// The visitor can still write: the message and its event are stored
	// (the outbox publishes later).
	if r := say(t, base, ch.ID, token, map[string]any{"text": "anyone there?"}); r.Status != http.StatusCreated {
		t.Fatalf("say while NATS is down: %d %s", r.Status, r.Body)
	}
	if n := h.count("outbox", ""); n != 1 {
		t.Fatalf("outbox = %d", n)
	}

	n.start()
	wait.Until(t, 10*time.Second, "the stream after NATS is back", func() bool {
		r := widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history", token, "")
		return r.Status == http.StatusOK && h.ready()
	})
	openStream(t, base, ch.ID, token)
}

// TestWebchatPostbackOfTheLatest100Messages: a tap counts when its payload
// is a postback button's among the conversation's latest 100 messages (no
// more than the widget's history shows), not any older one
// (docs/channels.md "Webchat").
func TestWebchatPostbackOfTheLatest100Messages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.webchatChannel(ws, "external")
	token, _ := newVisitor(t, h.base, ch.ID)
	tap := func(clientID string) widgetResp {
		return widgetCall(t, http.MethodPost, h.base+"/webchat/"+ch.ID+"/postbacks", token,
			`{"payload":"OLD","client_message_id":"`+clientID+`"}`)
	}
	say(t, h.base, ch.ID, token, map[string]any{"text": "hi"})
	conv := h.conversations(ws, "").Conversations[0]
	send := func(body map[string]any) {
		t.Helper()
		body["conversation_id"] = conv.ID
		if err := h.api(ws, http.MethodPost, "/v1/messages", body, nil); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"text": "Choose", "buttons": []map[string]any{{"type": "postback", "title": "Old offer", "payload": "OLD"}}})
	for i := range 99 {
		send(map[string]any{"text": "news " + strconv.Itoa(i)})
	}
	// The button's message is the 100th newest: its tap counts.
	if r := tap("tap-1"); r.Status != http.StatusCreated {
		t.Fatalf("tap on the 100th newest message: %d %s", r.Status, r.Body)
	}
	// That tap made it the 101st.
	wantWidgetErr(t, tap("tap-2"), http.StatusBadRequest, "invalid_request", "payload is not the payload of a postback button")
}
