package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// The built-in AI's side of messaging: each customer message of an auto or
// suggest channel is a chat turn on the chat stream, numbered per
// conversation; the flow-runner's chat runs send (sender ai) and draft
// suggestions through the admin routes, once per key; and a conversation's
// chat state (handover, tags, assignee, unanswered) follows its rules.

var ctx = context.Background()

// chatTurns waits until the test's chat stream holds n turns and returns
// them decoded, each checked to be on its conversation's subject with its
// id as Nats-Msg-Id.
func (h *harness) chatTurns(t *testing.T, js jetstream.JetStream, n int) []*eventsv1.ChatTurn {
	t.Helper()
	chat := natsx.ChatStream(h.env.Stream)
	var msgs []*jetstream.RawStreamMsg
	wait.Until(t, 5*time.Second, fmt.Sprintf("%d chat turns in the stream", n), func() bool {
		msgs = streamMessages(t, js, chat.Name)
		return len(msgs) >= n
	})
	out := make([]*eventsv1.ChatTurn, len(msgs))
	for i, m := range msgs {
		var turn eventsv1.ChatTurn
		if err := proto.Unmarshal(m.Data, &turn); err != nil {
			t.Fatal(err)
		}
		if m.Subject != chat.ChatSubject(turn.GetWorkspaceId(), turn.GetConversationId()) || m.Header.Get("Nats-Msg-Id") != turn.GetId() {
			t.Fatalf("turn %d on subject %s with id %s: %v", i, m.Subject, m.Header.Get("Nats-Msg-Id"), &turn)
		}
		out[i] = &turn
	}
	return out
}

// sendMessages counts the Bot API's sendMessage calls so far.
func (h *harness) sendMessages() int {
	n := 0
	for _, c := range h.tg.Calls() {
		if c.Method == "sendMessage" {
			n++
		}
	}
	return n
}

// chatText is a chat run's text message.
func chatText(text string) messagingapi.OutboundMessage {
	return messagingapi.OutboundMessage{Type: "text", Text: text}
}

func TestChatTurnsNumberEachConversationsCustomerMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	update := func(i int64) tgUpdate {
		return tgUpdate{UpdateID: i, MessageID: 10 + i, FromID: 4242, First: "Ada", Date: t0.Unix() + i, Text: fmt.Sprintf("message %d", i)}
	}
	for i := int64(1); i <= 3; i++ {
		h.deliver(ch, update(i))
	}
	// Telegram delivers the second update again: it is stored once, and
	// so is its turn.
	h.deliver(ch, update(2))

	turns := h.chatTurns(t, js, 3)
	conv := h.conversations(ws, "").Conversations[0]
	stored := h.messages(ws, conv.ID, "").Messages
	if len(stored) != 3 || h.turnRows() != 3 || len(turns) != 3 {
		t.Fatalf("%d messages, %d turns written, %d published; want 3 of each", len(stored), h.turnRows(), len(turns))
	}
	for i, turn := range turns {
		m := stored[len(stored)-1-i]
		want := &eventsv1.ChatTurn{
			Id: turn.GetId(), WorkspaceId: ws, ConversationId: conv.ID, Seq: int64(i + 1), Mode: "auto", ChannelId: ch.ID,
			Channel: &eventsv1.Channel{Kind: "telegram", ExternalId: ch.ExternalID},
			Contact: &eventsv1.Contact{Id: conv.Contact.ID, SenderId: "4242", Name: "Ada"},
			Message: &eventsv1.Message{
				Id: m.ID, Text: fmt.Sprintf("message %d", i+1), Type: "text", ExternalId: m.ExternalID,
				CreatedAt: timestamppb.New(t0.Add(time.Duration(i+1) * time.Second)),
			},
			CreatedAt: turn.GetCreatedAt(),
		}
		if !proto.Equal(turn, want) {
			t.Fatalf("turn %d =\n%v\nwant\n%v", i, turn, want)
		}
		if _, err := uuid.Parse(turn.GetId()); err != nil || time.Since(turn.GetCreatedAt().AsTime()) > time.Minute {
			t.Fatalf("turn %d: id %q, created %v", i, turn.GetId(), turn.GetCreatedAt().AsTime())
		}
	}

	// A suggest channel's turns carry their mode; an external channel
	// writes none, and its webhook event as before.
	suggest := h.telegramChannel(ws, "suggest")
	external := h.telegramChannel(ws, "external")
	h.deliver(external, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 5, First: "Ed", Date: t0.Unix(), Text: "for the webhook"})
	h.deliver(suggest, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 6, First: "Sue", Date: t0.Unix(), Text: "draft me an answer"})
	turns = h.chatTurns(t, js, 4)
	if s := turns[3]; s.GetMode() != "suggest" || s.GetSeq() != 1 || s.GetChannelId() != suggest.ID || s.GetMessage().GetText() != "draft me an answer" {
		t.Fatalf("suggest channel's turn = %v", s)
	}
	if events := streamEvents(t, js, h, 1); len(events) != 1 || events[0].GetMessageReceived().GetMessage().GetText() != "for the webhook" {
		t.Fatalf("events = %v", events)
	}

	// A mode changes from the next message; the conversation's numbers go
	// on where they were.
	h.setMode(ch.ID, "external")
	h.deliver(ch, update(4))
	h.setMode(ch.ID, "auto")
	h.deliver(ch, update(5))
	turns = h.chatTurns(t, js, 5)
	if last := turns[4]; last.GetSeq() != 4 || last.GetConversationId() != conv.ID || last.GetMessage().GetText() != "message 5" {
		t.Fatalf("turn after the external spell = %v", last)
	}
	if events := streamEvents(t, js, h, 2); events[1].GetMessageReceived().GetMessage().GetText() != "message 4" {
		t.Fatalf("event of the external spell = %v", events[1])
	}
	if n := h.turnRows(); n != 5 {
		t.Fatalf("turns written = %d, want 5", n)
	}
}

func TestHandedOverConversationTakesNoTurnsAndNoAISends(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ops := h.ops()
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 9, First: "Al", Date: t0.Unix(), Text: "first"})
	conv := h.conversations(ws, "").Conversations[0]

	state, err := ops.HandOver(ctx, ws, conv.ID, "flow: a handover node")
	if err != nil || state.AI != messagingapi.ConversationHandedOver || state.HandoverReason != "flow: a handover node" {
		t.Fatalf("HandOver = %+v, %v", state, err)
	}
	h.deliver(ch, tgUpdate{UpdateID: 2, MessageID: 2, FromID: 9, First: "Al", Date: t0.Unix() + 1, Text: "for an operator"})
	if n, turns := h.count("messages", ""), h.turnRows(); n != 2 || turns != 1 {
		t.Fatalf("%d messages, %d turns: a handed-over conversation's message is stored and no turn", n, turns)
	}

	// The AI sends and drafts nothing there; the API's sends (an
	// operator's replies) go as ever.
	sent := h.sendMessages()
	_, err = ops.SendAIMessage(ctx, conv.ID, messagingapi.SendAIMessage{WorkspaceID: ws, Key: "turn-1:1", RunID: "run-1", Message: chatText("late answer")})
	wantErr(t, err, http.StatusConflict, "conversation_handed_over", "handed over")
	_, err = ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: "turn-1:1", RunID: "run-1",
		Messages: []messagingapi.OutboundMessage{chatText("late draft")}})
	wantErr(t, err, http.StatusConflict, "conversation_handed_over", "handed over")
	var reply messagingapi.MessageSent
	if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "An operator here"}, &reply); err != nil || reply.Message.Sender != "user" {
		t.Fatalf("API send to a handed-over conversation: %+v, %v", reply, err)
	}
	if n := h.sendMessages(); n != sent+1 {
		t.Fatalf("telegram got %d sends, want the API's one", n-sent)
	}
	if w, _ := ops.Suggestion(ctx, ws, conv.ID); w != nil {
		t.Fatalf("a draft was kept: %+v", w)
	}

	// Resumed, the next customer message is the next turn.
	if state, err = ops.ResumeAI(ctx, ws, conv.ID); err != nil || state.AI != messagingapi.ConversationAIOn || state.HandoverReason != "" {
		t.Fatalf("ResumeAI = %+v, %v", state, err)
	}
	h.deliver(ch, tgUpdate{UpdateID: 3, MessageID: 3, FromID: 9, First: "Al", Date: t0.Unix() + 2, Text: "third"})
	turns := h.chatTurns(t, js, 2)
	if turns[1].GetSeq() != 2 || turns[1].GetMessage().GetText() != "third" {
		t.Fatalf("turn after resuming = %v", turns[1])
	}

	// A reason is bounded.
	_, err = ops.HandOver(ctx, ws, conv.ID, strings.Repeat("r", 501))
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "reason must be at most 500 characters")
}

func TestPostbacksAreChatTurns(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph))
	js := h.env.JetStream(t)
	ops := h.ops()
	ws := uuid.NewString()

	// A Telegram button tap.
	tg := h.telegramChannel(ws, "auto")
	if r := h.postUpdate(tg.ID, tg.Secret, tgCallback{UpdateID: 1, QueryID: "q-1", FromID: 77, First: "Bo", MessageID: 5,
		Buttons: [][2]string{{"Yes", "YES"}}, Data: "YES"}.JSON()); r.Code != http.StatusOK {
		t.Fatalf("callback: %d %s", r.Code, r.Body)
	}
	turns := h.chatTurns(t, js, 1)
	if p := turns[0]; p.GetPostback().GetPayload() != "YES" || p.GetPostback().GetReceivedAt() == nil || p.GetMessage().GetType() != "postback" || p.GetSeq() != 1 {
		t.Fatalf("telegram tap's turn = %v", p)
	}

	// Messenger postbacks.
	h.metaChannel(ws, "messenger", testPageID, "auto")
	h.sendMeta(metaTestdataFile(t, "messenger_postback.json"))
	turns = h.chatTurns(t, js, 3)
	for i, payload := range []string{"HUMAN", "GET_STARTED"} {
		if p := turns[1+i]; p.GetPostback().GetPayload() != payload || p.GetSeq() != int64(i+1) || p.GetChannel().GetKind() != "messenger" {
			t.Fatalf("messenger postback %d's turn = %v", i, p)
		}
	}

	// A webchat visitor's message, the AI's answer with a button, pushed
	// live as the AI's, and the visitor's tap on it.
	web := h.webchatChannel(ws, "auto")
	token, _ := newVisitor(t, h.base, web.ID)
	say(t, h.base, web.ID, token, map[string]any{"text": "hi"})
	turns = h.chatTurns(t, js, 4)
	conv := turns[3].GetConversationId()
	stream := openStream(t, h.base, web.ID, token)
	answer, err := ops.SendAIMessage(ctx, conv, messagingapi.SendAIMessage{WorkspaceID: ws, Key: turns[3].GetId() + ":1", RunID: "run-w",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Shall I call someone?", Buttons: []messagingapi.Button{{Type: "postback", Title: "Talk to a human", Payload: "HUMAN"}}}})
	if err != nil || answer.Sender != "ai" {
		t.Fatalf("AI send: %+v, %v", answer, err)
	}
	pushed := decodeWidgetMessage(t, stream.next(t, "message").Data)
	if pushed.Sender != "ai" || pushed.Text != "Shall I call someone?" || len(pushed.Buttons) != 1 || pushed.ID != answer.ExternalID {
		t.Fatalf("pushed = %+v", pushed)
	}
	if hist := history(t, h.base, web.ID, token); len(hist) != 2 || hist[1].ID != pushed.ID || hist[1].Sender != "ai" || hist[1].Text != pushed.Text {
		t.Fatalf("history = %+v, want the pushed message last, as the AI's", hist)
	}
	if r := widgetCall(t, http.MethodPost, h.base+"/webchat/"+web.ID+"/postbacks", token, `{"payload":"HUMAN"}`); r.Status != http.StatusCreated {
		t.Fatalf("tap: %d %s", r.Status, r.Body)
	}
	turns = h.chatTurns(t, js, 5)
	if p := turns[4]; p.GetPostback().GetPayload() != "HUMAN" || p.GetSeq() != 2 || p.GetConversationId() != conv || p.GetMessage().GetText() != "Talk to a human" {
		t.Fatalf("webchat tap's turn = %v", p)
	}
}

func TestAISendsGoOnceThroughTheSendPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ops := h.ops()
	ws := uuid.NewString()
	// The customer writes while the channel is external: a webhook event.
	ch := h.telegramChannel(ws, "external")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 31, First: "Cy", Date: t0.Unix(), Text: "hello?"})
	streamEvents(t, js, h, 1)
	conv := h.conversations(ws, "").Conversations[0]

	// On an external channel the developer answers alone: an AI send (a
	// run still answering a message from before the switch, or waiting in
	// its flow) is refused and sends nothing; the key stays free.
	req := messagingapi.SendAIMessage{WorkspaceID: ws, Key: "turn-1:1", RunID: "run-1",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Hello from the AI", QuickReplies: []string{"Yes", "No"}}}
	_, err := ops.SendAIMessage(ctx, conv.ID, req)
	wantErr(t, err, http.StatusConflict, "ai_mode_external", "external")
	if n, stored := h.sendMessages(), h.count("messages", "sender = 'ai'"); n != 0 || stored != 0 {
		t.Fatalf("the AI on an external channel: %d sends, %d stored", n, stored)
	}

	// Back in auto, the AI sends, and its messages are no events.
	h.setMode(ch.ID, "auto")
	first, err := ops.SendAIMessage(ctx, conv.ID, req)
	if err != nil || first.Sender != "ai" || first.Type != "text" || first.Content != "Hello from the AI" || first.Metadata["run_id"] != "run-1" ||
		!reflect.DeepEqual(first.Metadata["quick_replies"], []any{"Yes", "No"}) || first.ExternalID != h.tg.LastMessageID() {
		t.Fatalf("AI send = %+v, %v", first, err)
	}
	if n := h.sendMessages(); n != 1 {
		t.Fatalf("telegram got %d sends", n)
	}
	// The run answers its turn again (its process died): the same key is
	// the first message, however the run words it now, and nothing goes.
	req.RunID, req.Message.Text = "run-2", "Hello again"
	again, err := ops.SendAIMessage(ctx, conv.ID, req)
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("repeat = %+v, %v; want %+v", again, err, first)
	}
	raw := h.adminRaw(http.MethodPost, "/admin/conversations/"+conv.ID+"/ai-messages", jsonBody(req))
	if raw.status != http.StatusCreated || !raw.replayed() {
		t.Fatalf("repeat answered %v, want the first answer replayed", raw)
	}
	if n := h.sendMessages(); n != 1 {
		t.Fatalf("telegram got %d sends for one key", n)
	}
	// The same key on another conversation is another request.
	other := h.telegramChannel(ws, "auto")
	h.deliver(other, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 32, First: "Di", Date: t0.Unix(), Text: "me too"})
	var otherConv string
	for _, c := range h.conversations(ws, "").Conversations {
		if c.ChannelID == other.ID {
			otherConv = c.ID
		}
	}
	_, err = ops.SendAIMessage(ctx, otherConv, req)
	wantErr(t, err, http.StatusUnprocessableEntity, "idempotency_key_reuse", "")

	// A carousel is one message.
	car, err := ops.SendAIMessage(ctx, conv.ID, messagingapi.SendAIMessage{WorkspaceID: ws, Key: "turn-1:2", RunID: "run-1",
		Message: messagingapi.OutboundMessage{Type: "carousel", Cards: []messagingapi.Card{
			{Title: "Blue", Buttons: []messagingapi.Button{{Type: "postback", Title: "Buy", Payload: "BUY_BLUE"}}}, {Title: "Red"},
		}}})
	if err != nil || car.Type != "carousel" || car.Sender != "ai" || car.Metadata["run_id"] != "run-1" {
		t.Fatalf("AI carousel = %+v, %v", car, err)
	}
	msgs := h.messages(ws, conv.ID, "").Messages
	if len(msgs) != 3 || msgs[0].Sender != "ai" || msgs[1].Sender != "ai" || msgs[2].Sender != "contact" {
		t.Fatalf("public messages = %+v", msgs)
	}
	// Never forwarded to the webhook.
	if n := h.eventRows(); n != 1 {
		t.Fatalf("events written = %d, want the customer's one", n)
	}
	if n := len(streamMessages(t, js, h.env.Stream.Name)); n != 1 {
		t.Fatalf("events stream holds %d, want the customer's one", n)
	}

	// What the run sends wrong is refused naming the field, before
	// anything goes; the key stays free.
	bad := []struct {
		name string
		req  messagingapi.SendAIMessage
		msg  string
	}{
		{"no key", messagingapi.SendAIMessage{WorkspaceID: ws, RunID: "r", Message: chatText("x")}, "key is required"},
		{"long key", messagingapi.SendAIMessage{WorkspaceID: ws, Key: strings.Repeat("k", 124), RunID: "r", Message: chatText("x")}, "key must be at most 123"},
		{"no run", messagingapi.SendAIMessage{WorkspaceID: ws, Key: "k", Message: chatText("x")}, "run_id is required"},
		{"no workspace", messagingapi.SendAIMessage{Key: "k", RunID: "r", Message: chatText("x")}, "workspace_id is required"},
		{"a video", messagingapi.SendAIMessage{WorkspaceID: ws, Key: "k", RunID: "r", Message: messagingapi.OutboundMessage{Type: "video"}}, "message.type must be text or carousel"},
		{"empty text", messagingapi.SendAIMessage{WorkspaceID: ws, Key: "k", RunID: "r", Message: chatText(" ")}, "message.text is required"},
		{"untitled card", messagingapi.SendAIMessage{WorkspaceID: ws, Key: "k", RunID: "r", Message: messagingapi.OutboundMessage{Type: "carousel", Cards: []messagingapi.Card{{}}}}, "message.cards[0].title is required"},
	}
	for _, b := range bad {
		_, err := ops.SendAIMessage(ctx, conv.ID, b.req)
		wantErr(t, err, http.StatusBadRequest, "invalid_request", b.msg)
	}

	// The platform's refusal is the API's answer, and frees the key for
	// the run's next try.
	h.tg.FailNext("sendMessage", http.StatusForbidden, "Forbidden: bot was blocked by the user")
	retry := messagingapi.SendAIMessage{WorkspaceID: ws, Key: "turn-2:1", RunID: "run-3", Message: chatText("Still there?")}
	_, err = ops.SendAIMessage(ctx, conv.ID, retry)
	wantErr(t, err, http.StatusBadGateway, "platform_error", "bot was blocked by the user")
	if m, err := ops.SendAIMessage(ctx, conv.ID, retry); err != nil || m.Content != "Still there?" {
		t.Fatalf("retry after a refusal = %+v, %v", m, err)
	}
	if n := h.sendMessages(); n != 1+2+2 {
		t.Fatalf("telegram got %d sendMessage calls, want the text, the carousel's two cards and the refused and retried one", n)
	}
}

// adminRaw sends body to an admin route (path may hold a query) and
// returns the whole answer.
func (h *harness) adminRaw(method, path, body string) answer {
	h.t.Helper()
	req := &rpcv1.Request{Method: method, Body: []byte(body), Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}}
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	resp, err := h.client.Do(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	hd := http.Header{}
	for _, x := range resp.GetHeaders() {
		hd.Add(x.GetName(), x.GetValue())
	}
	return answer{status: int(resp.GetStatus()), header: hd, body: resp.GetBody()}
}

func TestAISendsKeepTheChannelsRules(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph), withWindow(time.Hour))
	ops := h.ops()
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "auto")
	h.metaChannel(ws, "instagram", testIGID, "auto")
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, testPSID, "m_stale", "hello?", time.Now().Add(-2*time.Hour))))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, testIGSID, "m_ig", "hi", time.Now())))
	conv := map[string]string{}
	for _, c := range h.conversations(ws, "").Conversations {
		conv[c.Platform] = c.ID
	}
	before := len(graph.sends())

	// The customer wrote 2 h ago, with a 1 h window.
	_, err := ops.SendAIMessage(ctx, conv["messenger"], messagingapi.SendAIMessage{WorkspaceID: ws, Key: "t1:1", RunID: "r1", Message: chatText("Sorry for the wait")})
	wantErr(t, err, http.StatusConflict, "outside_messaging_window", "")
	// Instagram takes no buttons.
	_, err = ops.SendAIMessage(ctx, conv["instagram"], messagingapi.SendAIMessage{WorkspaceID: ws, Key: "t2:1", RunID: "r2",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Buy?", Buttons: []messagingapi.Button{{Type: "postback", Title: "Buy", Payload: "BUY"}}}})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "message.buttons")
	if n := len(graph.sends()); n != before {
		t.Fatalf("meta got %d sends, want none", n-before)
	}
	// Within its rules it goes, as the AI's.
	m, err := ops.SendAIMessage(ctx, conv["instagram"], messagingapi.SendAIMessage{WorkspaceID: ws, Key: "t2:1", RunID: "r2",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Buy?", QuickReplies: []string{"Yes"}}})
	if err != nil || m.Sender != "ai" || len(graph.sends()) != before+1 {
		t.Fatalf("instagram AI send = %+v, %v", m, err)
	}
}

func TestSuggestions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "suggest")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 51, First: "Flo", Date: t0.Unix(), Text: "Do you ship abroad?"})
	conv := h.conversations(ws, "").Conversations[0]
	draft := func(key, run string, msgs ...messagingapi.OutboundMessage) messagingapi.Suggestion {
		t.Helper()
		s, err := ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: key, RunID: run, Messages: msgs})
		if err != nil {
			t.Fatalf("draft %s: %v", key, err)
		}
		return s
	}
	waiting := func() *messagingapi.Suggestion {
		t.Helper()
		s, err := ops.Suggestion(ctx, ws, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	first := draft("turn-1:1", "run-1", chatText("We do."), messagingapi.OutboundMessage{Type: "text", Text: "Where to?", QuickReplies: []string{"EU", "US"}})
	if first.RunID != "run-1" || len(first.Messages) != 2 || first.Messages[1].QuickReplies[1] != "US" || first.CreatedAt == "" {
		t.Fatalf("draft = %+v", first)
	}
	if w := waiting(); w == nil || !reflect.DeepEqual(*w, first) {
		t.Fatalf("waiting = %+v, want the draft", w)
	}
	if s, err := ops.Conversation(ctx, ws, conv.ID); err != nil || !s.SuggestionWaiting {
		t.Fatalf("conversation = %+v, %v", s, err)
	}
	// A newer draft replaces it; the first run's key again (its process
	// died) answers its draft and does not bring it back.
	second := draft("turn-2:1", "run-2", chatText("Yes, worldwide."))
	if again := draft("turn-1:1", "run-1b", chatText("other words")); !reflect.DeepEqual(again, first) {
		t.Fatalf("repeated draft = %+v, want %+v", again, first)
	}
	if w := waiting(); w == nil || !reflect.DeepEqual(*w, second) {
		t.Fatalf("waiting = %+v, want the newer draft", w)
	}
	if n := h.sendMessages(); n != 0 {
		t.Fatalf("a draft reached the customer: %d sends", n)
	}

	// Sent as drafted: an operator's reply.
	sent, err := ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Operator: "Ann@Example.com"})
	if err != nil || len(sent) != 1 || sent[0].Sender != "user" || sent[0].Content != "Yes, worldwide." || sent[0].Metadata["operator"] != "ann@example.com" {
		t.Fatalf("sent = %+v, %v", sent, err)
	}
	if n := h.sendMessages(); n != 1 || waiting() != nil {
		t.Fatalf("%d sends, waiting %+v", n, waiting())
	}
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws})
	wantErr(t, err, http.StatusNotFound, "suggestion_not_found", "")

	// Sent as edited.
	draft("turn-3:1", "run-3", chatText("Draft"))
	sent, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Messages: []messagingapi.OutboundMessage{
		chatText("Edited by a person"), {Type: "carousel", Cards: []messagingapi.Card{{Title: "Shipping rates"}}},
	}})
	if err != nil || len(sent) != 2 || sent[0].Content != "Edited by a person" || sent[1].Type != "carousel" || sent[0].Sender != "user" || sent[1].Sender != "user" {
		t.Fatalf("sent as edited = %+v, %v", sent, err)
	}
	if _, ok := sent[0].Metadata["operator"]; ok {
		t.Fatalf("no operator given, one kept: %v", sent[0].Metadata)
	}
	// An edit is checked before anything is taken.
	draft("turn-4:1", "run-4", chatText("Keep me"))
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws, Messages: []messagingapi.OutboundMessage{{Type: "carousel"}}})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "messages[0].cards must have at least one element")
	if w := waiting(); w == nil || w.RunID != "run-4" {
		t.Fatalf("waiting after a refused edit = %+v", w)
	}

	// Discarded.
	if s, err := ops.DiscardSuggestion(ctx, ws, conv.ID, nil); err != nil || s.SuggestionWaiting || waiting() != nil {
		t.Fatalf("discard: %+v, %v", s, err)
	}
	if _, err := ops.DiscardSuggestion(ctx, ws, conv.ID, nil); err != nil {
		t.Fatalf("discarding none: %v", err)
	}

	// What the platform refuses waits again: the text went, the carousel's
	// photo did not.
	draft("turn-5:1", "run-5", chatText("Here are our rates:"),
		messagingapi.OutboundMessage{Type: "carousel", Cards: []messagingapi.Card{{Title: "EU", ImageURL: "https://cdn.example/eu.png"}}})
	h.tg.FailNext("sendPhoto", http.StatusBadRequest, "Bad Request: wrong file identifier/HTTP URL specified")
	sends := h.sendMessages()
	_, err = ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws})
	wantErr(t, err, http.StatusBadGateway, "platform_error", "wrong file identifier")
	if w := waiting(); h.sendMessages() != sends+1 || w == nil || len(w.Messages) != 1 || w.Messages[0].Type != "carousel" || w.RunID != "run-5" {
		t.Fatalf("after a refusal: waiting %+v", w)
	}

	// A draft is bounded and checked.
	tooMany := make([]messagingapi.OutboundMessage, 11)
	for i := range tooMany {
		tooMany[i] = chatText("m")
	}
	for _, b := range []struct {
		msgs []messagingapi.OutboundMessage
		want string
	}{
		{nil, "messages must have at least one message"},
		{tooMany, "messages must have at most 10 messages"},
		{[]messagingapi.OutboundMessage{chatText("ok"), {Type: "text", Text: "x", QuickReplies: []string{strings.Repeat("q", 21)}}}, "messages[1].quick_replies[0] must be at most 20"},
	} {
		_, err := ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: "bad", RunID: "r", Messages: b.msgs})
		wantErr(t, err, http.StatusBadRequest, "invalid_request", b.want)
	}
}

func TestConversationChatState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 61, First: "Gil", Date: t0.Unix(), Text: "hi"})
	conv := h.conversations(ws, "").Conversations[0]

	s, err := ops.Conversation(ctx, ws, conv.ID)
	if err != nil || !reflect.DeepEqual(s, messagingapi.ConversationState{
		Conversation: conv, WorkspaceID: ws, AI: messagingapi.ConversationAIOn, Tags: []string{},
	}) {
		t.Fatalf("Conversation = %+v, %v", s, err)
	}

	// Tags: each once whatever its case, in order, at most 20 of 50
	// characters; a refused call adds none.
	if s, err = ops.AddTags(ctx, ws, conv.ID, []string{"vip", " late "}); err != nil || !reflect.DeepEqual(s.Tags, []string{"vip", "late"}) {
		t.Fatalf("AddTags = %+v, %v", s.Tags, err)
	}
	if s, err = ops.AddTags(ctx, ws, conv.ID, []string{"VIP", "refund", "refund"}); err != nil || !reflect.DeepEqual(s.Tags, []string{"vip", "late", "refund"}) {
		t.Fatalf("AddTags again = %+v, %v", s.Tags, err)
	}
	many := make([]string, 18)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	_, err = ops.AddTags(ctx, ws, conv.ID, many)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "tags would make 21 tags; a conversation has at most 20")
	_, err = ops.AddTags(ctx, ws, conv.ID, []string{"ok", strings.Repeat("x", 51)})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "tags[1] must be at most 50 characters")
	_, err = ops.AddTags(ctx, ws, conv.ID, nil)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "tags must have at least one tag")
	if s, _ = ops.Conversation(ctx, ws, conv.ID); len(s.Tags) != 3 {
		t.Fatalf("tags after refusals = %v", s.Tags)
	}

	// The assignee: an email, kept in lower case, or none.
	if s, err = ops.Assign(ctx, ws, conv.ID, " Ann@Example.com"); err != nil || s.Assignee != "ann@example.com" {
		t.Fatalf("Assign = %+v, %v", s, err)
	}
	_, err = ops.Assign(ctx, ws, conv.ID, "Ann <ann@example.com>")
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "assignee must be an email address")
	err = h.admin(http.MethodPut, "/admin/conversations/"+conv.ID+"/assignee", map[string]any{"workspace_id": ws}, nil)
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "assignee is required")
	if s, err = ops.Assign(ctx, ws, conv.ID, ""); err != nil || s.Assignee != "" {
		t.Fatalf("unassign = %+v, %v", s, err)
	}

	// Unanswered: marked by the flow-runner with its reason, cleared by
	// any answer: the AI's, the API's, an operator's suggestion.
	_, err = ops.MarkUnanswered(ctx, ws, conv.ID, "bored")
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "reason must be ai_limit_reached or ai_unavailable")
	answers := map[string]func(){
		"AI": func() {
			if _, err := ops.SendAIMessage(ctx, conv.ID, messagingapi.SendAIMessage{WorkspaceID: ws, Key: uuid.NewString(), RunID: "r", Message: chatText("AI here")}); err != nil {
				t.Fatal(err)
			}
		},
		"API": func() {
			if err := h.api(ws, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv.ID, "text": "Dev here"}, nil); err != nil {
				t.Fatal(err)
			}
		},
		"suggestion": func() {
			if _, err := ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: uuid.NewString(), RunID: "r",
				Messages: []messagingapi.OutboundMessage{chatText("Draft")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := ops.SendSuggestion(ctx, conv.ID, messagingapi.SendSuggestion{WorkspaceID: ws}); err != nil {
				t.Fatal(err)
			}
		},
	}
	updateID := int64(100)
	for name, answer := range answers {
		for _, reason := range []string{messagingapi.UnansweredAILimitReached, messagingapi.UnansweredAIUnavailable} {
			if s, err = ops.MarkUnanswered(ctx, ws, conv.ID, reason); err != nil || s.Unanswered != reason {
				t.Fatalf("MarkUnanswered(%s) = %+v, %v", reason, s, err)
			}
		}
		// A customer message is no answer.
		updateID++
		h.deliver(ch, tgUpdate{UpdateID: updateID, MessageID: updateID, FromID: 61, First: "Gil", Date: t0.Unix() + 1, Text: "hello??"})
		if s, _ = ops.Conversation(ctx, ws, conv.ID); s.Unanswered != messagingapi.UnansweredAIUnavailable {
			t.Fatalf("unanswered after the customer wrote again = %q", s.Unanswered)
		}
		answer()
		if s, _ = ops.Conversation(ctx, ws, conv.ID); s.Unanswered != "" {
			t.Fatalf("the %s's answer left unanswered %q", name, s.Unanswered)
		}
	}
	if s.Tags == nil || len(s.Tags) != 3 || s.AI != messagingapi.ConversationAIOn {
		t.Fatalf("state = %+v", s)
	}
}

// TestConversationRoutesAreWorkspaceScoped: another workspace's
// conversation does not exist for any of the routes, and changes nothing.
func TestConversationRoutesAreWorkspaceScoped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws, other := uuid.NewString(), uuid.NewString()
	ch := h.telegramChannel(ws, "auto")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 71, First: "Hal", Date: t0.Unix(), Text: "hi"})
	conv := h.conversations(ws, "").Conversations[0]
	if _, err := ops.DraftSuggestion(ctx, conv.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: "k", RunID: "r", Messages: []messagingapi.OutboundMessage{chatText("mine")}}); err != nil {
		t.Fatal(err)
	}
	before, err := ops.Conversation(ctx, ws, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(ws, id string) error{
		"Conversation": func(ws, id string) error { _, err := ops.Conversation(ctx, ws, id); return err },
		"HandOver":     func(ws, id string) error { _, err := ops.HandOver(ctx, ws, id, "x"); return err },
		"ResumeAI":     func(ws, id string) error { _, err := ops.ResumeAI(ctx, ws, id); return err },
		"AddTags":      func(ws, id string) error { _, err := ops.AddTags(ctx, ws, id, []string{"x"}); return err },
		"Assign":       func(ws, id string) error { _, err := ops.Assign(ctx, ws, id, "x@example.com"); return err },
		"MarkUnanswered": func(ws, id string) error {
			_, err := ops.MarkUnanswered(ctx, ws, id, messagingapi.UnansweredAIUnavailable)
			return err
		},
		"SendAIMessage": func(ws, id string) error {
			_, err := ops.SendAIMessage(ctx, id, messagingapi.SendAIMessage{WorkspaceID: ws, Key: uuid.NewString(), RunID: "r", Message: chatText("x")})
			return err
		},
		"DraftSuggestion": func(ws, id string) error {
			_, err := ops.DraftSuggestion(ctx, id, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: uuid.NewString(), RunID: "r", Messages: []messagingapi.OutboundMessage{chatText("x")}})
			return err
		},
		"Suggestion": func(ws, id string) error { _, err := ops.Suggestion(ctx, ws, id); return err },
		"SendSuggestion": func(ws, id string) error {
			_, err := ops.SendSuggestion(ctx, id, messagingapi.SendSuggestion{WorkspaceID: ws})
			return err
		},
		"DiscardSuggestion": func(ws, id string) error { _, err := ops.DiscardSuggestion(ctx, ws, id, nil); return err },
	}
	for name, call := range calls {
		for _, target := range []struct{ what, ws, id string }{
			{"another workspace's conversation", other, conv.ID},
			{"an unknown conversation", ws, uuid.NewString()},
			{"a malformed conversation id", ws, "nope"},
		} {
			err := call(target.ws, target.id)
			if e, ok := errs.As(err); !ok || e.Status != http.StatusNotFound || e.Code != "conversation_not_found" {
				t.Errorf("%s of %s: %v, want 404 conversation_not_found", name, target.what, err)
			}
		}
		if err := call("", conv.ID); err == nil || !strings.Contains(err.Error(), "workspace_id is required") {
			t.Errorf("%s without a workspace: %v", name, err)
		}
		if err := call("acme", conv.ID); err == nil || !strings.Contains(err.Error(), "workspace_id must be a workspace id") {
			t.Errorf("%s with a malformed workspace: %v", name, err)
		}
	}
	after, err := ops.Conversation(ctx, ws, conv.ID)
	if err != nil || !reflect.DeepEqual(after, before) || !after.SuggestionWaiting || h.sendMessages() != 0 {
		t.Fatalf("after other workspaces' calls: %+v, %v (before %+v), %d sends", after, err, before, h.sendMessages())
	}
}
