package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// tgCallback is a tap on an inline button of the bot's message, rendered as
// Telegram's callback_query update.
type tgCallback struct {
	UpdateID  int64
	QueryID   string
	FromID    int64
	First     string
	MessageID int64
	Buttons   [][2]string // text, callback_data
	Data      string
}

func (u tgCallback) JSON() string {
	rows := make([]any, len(u.Buttons))
	for i, b := range u.Buttons {
		rows[i] = []any{map[string]any{"text": b[0], "callback_data": b[1]}}
	}
	b, _ := json.Marshal(map[string]any{
		"update_id": u.UpdateID,
		"callback_query": map[string]any{
			"id":   u.QueryID,
			"from": map[string]any{"id": u.FromID, "is_bot": false, "first_name": u.First, "language_code": "en"},
			"message": map[string]any{
				"message_id":   u.MessageID,
				"from":         map[string]any{"id": 5550001, "is_bot": true, "first_name": "Parley", "username": "parley_test_bot"},
				"chat":         map[string]any{"id": u.FromID, "first_name": u.First, "type": "private"},
				"date":         t0.Unix(),
				"text":         "Pick one",
				"reply_markup": map[string]any{"inline_keyboard": rows},
			},
			"chat_instance": "-8172631123",
			"data":          u.Data,
		},
	})
	return string(b)
}

func (h *harness) answers() []string {
	var ids []string
	for _, c := range h.tg.Calls() {
		if c.Method == "answerCallbackQuery" {
			id, _ := c.Params["callback_query_id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}

func TestTelegramCallbackQueryBecomesPostback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	conv := h.customerConversation(ws, ch, 4242)
	wait.Until(t, 5*time.Second, "the message event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 1 })

	tap := tgCallback{UpdateID: 50, QueryID: "4382bfdwdsb323b2d9", FromID: 4242, First: "Cus", MessageID: 1001,
		Buttons: [][2]string{{"Track order", "TRACK_ORDER"}, {"Talk to us", "HUMAN"}}, Data: "HUMAN"}
	before := time.Now().UTC().Add(-time.Second)
	rec := h.postUpdate(ch.ID, ch.Secret, tap.JSON())
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("ingress: %d %q", rec.Code, rec.Body)
	}
	// Answered by the time the update is acknowledged, with the query's id
	// and the bot's token.
	if got := h.answers(); len(got) != 1 || got[0] != tap.QueryID {
		t.Fatalf("answerCallbackQuery calls = %v", got)
	}
	if last := h.tg.Calls()[len(h.tg.Calls())-1]; last.Token != h.botToken(ch.ID) || len(last.Params) != 1 {
		t.Fatalf("answer = %+v", last)
	}

	// Stored in the customer's conversation as a postback: the button's
	// title as content, the payload in metadata.
	msgs := h.messages(ws, conv.ID, "")
	if len(msgs.Messages) != 2 {
		t.Fatalf("messages = %+v", msgs)
	}
	m := msgs.Messages[0]
	if m.Sender != "contact" || m.Type != "postback" || m.Content != "Talk to us" || m.ExternalID != tap.QueryID ||
		m.Metadata["payload"] != "HUMAN" || len(m.Metadata) != 1 {
		t.Fatalf("postback message = %+v", m)
	}
	receivedAt, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
	if err != nil || receivedAt.Before(before) || receivedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("created_at %q is not the arrival time", m.CreatedAt)
	}

	var events []*jetstream.RawStreamMsg
	wait.Until(t, 5*time.Second, "the postback event", func() bool {
		events = streamMessages(t, js, h.env.Stream.Name)
		return len(events) == 2
	})
	if want := h.env.Stream.Subject(ws, "postback.received"); events[1].Subject != want {
		t.Fatalf("subject = %q, want %q", events[1].Subject, want)
	}
	var ev eventsv1.Event
	if err := proto.Unmarshal(events[1].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.GetType() != "postback.received" || ev.GetWorkspaceId() != ws || events[1].Header.Get("Nats-Msg-Id") != ev.GetId() {
		t.Fatalf("envelope = %v", &ev)
	}
	d := ev.GetPostbackReceived()
	want := &eventsv1.PostbackReceived{
		WorkspaceId:    ws,
		ConversationId: conv.ID,
		Platform:       "telegram",
		Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: ch.ExternalID},
		Contact:        &eventsv1.Contact{Id: conv.Contact.ID, SenderId: "4242", Name: "Cus", ProfilePic: ""},
		Message:        &eventsv1.Message{Id: m.ID, Text: "Talk to us", Type: "postback", ExternalId: tap.QueryID, CreatedAt: d.GetMessage().GetCreatedAt()},
		Postback:       &eventsv1.Postback{Payload: "HUMAN", ReceivedAt: d.GetPostback().GetReceivedAt()},
	}
	if !proto.Equal(d, want) {
		t.Fatalf("data =\n%v\nwant\n%v", d, want)
	}
	if !d.GetPostback().GetReceivedAt().AsTime().Equal(receivedAt) || !d.GetMessage().GetCreatedAt().AsTime().Equal(receivedAt) {
		t.Fatalf("received_at %v, created_at %v, stored %v", d.GetPostback().GetReceivedAt().AsTime(), d.GetMessage().GetCreatedAt().AsTime(), receivedAt)
	}

	// Telegram redelivers the update: stored once, no second event; the
	// query is answered again, in case the first answer was what failed.
	if rec := h.postUpdate(ch.ID, ch.Secret, tap.JSON()); rec.Code != http.StatusOK {
		t.Fatalf("redelivery: %d %s", rec.Code, rec.Body)
	}
	if n := h.count("messages", "type = 'postback'"); n != 1 {
		t.Fatalf("postback messages = %d after a redelivery", n)
	}
	if n := len(h.written()); n != 2 {
		t.Fatalf("events written = %d after a redelivery", n)
	}
	if got := h.answers(); len(got) != 2 {
		t.Fatalf("answerCallbackQuery calls = %v", got)
	}
}

func TestTelegramCallbackQueryEdges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "auto")

	// An auto channel keeps the tap in the inbox and forwards nothing. The
	// payload missing from the keyboard (the message was edited since) makes
	// the payload the title.
	tap := tgCallback{UpdateID: 1, QueryID: "q-1", FromID: 77, First: "Ann", MessageID: 5,
		Buttons: [][2]string{{"Other", "OTHER"}}, Data: "GONE"}
	if rec := h.postUpdate(ch.ID, ch.Secret, tap.JSON()); rec.Code != http.StatusOK {
		t.Fatalf("ingress: %d %s", rec.Code, rec.Body)
	}
	convs := h.conversations(ws, "").Conversations
	if len(convs) != 1 || convs[0].Contact.SenderID != "77" {
		t.Fatalf("conversations = %+v", convs)
	}
	m := h.messages(ws, convs[0].ID, "").Messages
	if len(m) != 1 || m[0].Type != "postback" || m[0].Content != "GONE" || m[0].Metadata["payload"] != "GONE" {
		t.Fatalf("messages = %+v", m)
	}
	if n := h.eventRows(); n != 0 {
		t.Fatalf("events = %d on an auto channel", n)
	}
	if n := h.turnRows(); n != 1 {
		t.Fatalf("chat turns = %d on an auto channel's tap, want 1", n)
	}

	// Telegram refusing the answer does not fail the update: it is stored
	// and acknowledged, so Telegram does not redeliver it.
	h.tg.SetFailure(&telegramfake.Failure{Status: 400, Body: `{"ok":false,"error_code":400,"description":"Bad Request: query is too old and response timeout expired or query ID is invalid"}`})
	tap = tgCallback{UpdateID: 2, QueryID: "q-2", FromID: 77, First: "Ann", MessageID: 5, Buttons: [][2]string{{"Yes", "YES"}}, Data: "YES"}
	if rec := h.postUpdate(ch.ID, ch.Secret, tap.JSON()); rec.Code != http.StatusOK {
		t.Fatalf("ingress with the answer refused: %d %s", rec.Code, rec.Body)
	}
	// Telegram unreachable: the same.
	h.tg.SetFailure(&telegramfake.Failure{Drop: true})
	tap = tgCallback{UpdateID: 3, QueryID: "q-3", FromID: 77, First: "Ann", MessageID: 5, Buttons: [][2]string{{"No", "NO"}}, Data: "NO"}
	if rec := h.postUpdate(ch.ID, ch.Secret, tap.JSON()); rec.Code != http.StatusOK {
		t.Fatalf("ingress with telegram unreachable: %d %s", rec.Code, rec.Body)
	}
	h.tg.SetFailure(nil)
	if n := h.count("messages", "type = 'postback'"); n != 3 {
		t.Fatalf("postback messages = %d, want 3", n)
	}
	if got := h.answers(); len(got) != 3 || got[1] != "q-2" || got[2] != "q-3" {
		t.Fatalf("answers attempted = %v", got)
	}

	// A game button has no callback_data: recorded as seen, nothing stored,
	// still answered so that it stops spinning.
	game := `{"update_id": 4, "callback_query": {"id": "q-4", "from": {"id": 77, "is_bot": false, "first_name": "Ann"},
		"inline_message_id": "AAAAAH0AAAB1", "chat_instance": "-8172631123", "game_short_name": "puzzle"}}`
	if rec := h.postUpdate(ch.ID, ch.Secret, game); rec.Code != http.StatusOK {
		t.Fatalf("game tap: %d %s", rec.Code, rec.Body)
	}
	if n := h.count("messages", ""); n != 3 {
		t.Fatalf("messages = %d after a game tap", n)
	}
	if n := h.count("ingress_receipts", "key = 'telegram:update:4'"); n != 1 {
		t.Fatalf("game tap receipt = %d", n)
	}
	if got := h.answers(); len(got) != 4 || got[3] != "q-4" {
		t.Fatalf("answers = %v", got)
	}
}
