package telegram

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

func TestUpdateInbound(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		file string
		want *conversation.Inbound
	}{
		{"private_text.json", &conversation.Inbound{
			SenderID: "111222333", SenderName: "Ada Lovelace", ReplyTo: "111222333", Type: "text",
			Text: "Where is my order? 📦", ExternalID: "4711", SentAt: time.Unix(1768471200, 0).UTC(),
		}},
		{"group_text.json", &conversation.Inbound{
			SenderID: "111222333", SenderName: "Ada", ReplyTo: "-1001234567890", Type: "text",
			Text: "/start@parley_bot", ExternalID: "12", SentAt: time.Unix(1768471260, 0).UTC(),
		}},
		{"edited_message.json", nil},
		{"channel_post.json", nil},
		{"sticker.json", nil},
		{"callback_query.json", &conversation.Inbound{
			SenderID: "111222333", SenderName: "Ada", ReplyTo: "111222333", Type: "postback",
			Text: "Track order", ExternalID: "4382bfdwdsb323b2d9", SentAt: received,
			Postback: &conversation.Postback{Payload: "TRACK_ORDER"},
		}},
		// The tapped button is found by its callback_data among several.
		{"callback_query_keyboard.json", &conversation.Inbound{
			SenderID: "111222333", SenderName: "Ada", ReplyTo: "111222333", Type: "postback",
			Text: "Talk to us", ExternalID: "4382bfdwdsb323b2e2", SentAt: received,
			Postback: &conversation.Postback{Payload: "HUMAN"},
		}},
		// A message too old to be shown (InaccessibleMessage): no keyboard,
		// so the title falls back to the data; replies go to its chat.
		{"callback_query_inaccessible.json", &conversation.Inbound{
			SenderID: "111222333", SenderName: "Ada Lovelace", ReplyTo: "-1001234567890", Type: "postback",
			Text: "SIZE_M", ExternalID: "4382bfdwdsb323b2e0", SentAt: received,
			Postback: &conversation.Postback{Payload: "SIZE_M"},
		}},
		// A game button carries no callback_data: nothing to forward.
		{"callback_query_game.json", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var u Update
			if err := json.Unmarshal(raw, &u); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if u.UpdateID == nil {
				t.Fatal("no update_id")
			}
			got, ok := u.Inbound(received)
			if tt.want == nil {
				if ok {
					t.Fatalf("Inbound = %+v, want nothing", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, *tt.want) {
				t.Fatalf("Inbound = %+v, %v\nwant      %+v", got, ok, *tt.want)
			}
		})
	}
}

func TestUpdateInboundWithoutDateUsesReceipt(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	u := Update{Message: &Message{MessageID: 1, From: &User{ID: 1, FirstName: "A"}, Chat: Chat{ID: 1}, Text: "x"}}
	got, ok := u.Inbound(received)
	if !ok || !got.SentAt.Equal(received) {
		t.Fatalf("Inbound = %+v, %v", got, ok)
	}
}

// FuzzUpdate feeds arbitrary bodies to the ingress parser: it must never
// panic, and whatever it accepts as a message has a sender and text.
func FuzzUpdate(f *testing.F) {
	for _, name := range []string{"private_text.json", "group_text.json", "edited_message.json", "channel_post.json", "sticker.json",
		"callback_query.json", "callback_query_keyboard.json", "callback_query_inaccessible.json", "callback_query_game.json"} {
		raw, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"update_id":1,"message":{"from":null,"text":"x"}}`))
	f.Add([]byte(`{"update_id":1,"message":{"from":{"id":-1},"chat":{},"date":-5,"text":"x"}}`))
	f.Add([]byte(`{"update_id":1,"callback_query":{"id":"q","from":null,"data":"x"}}`))
	f.Add([]byte(`{"update_id":1,"callback_query":{"id":"q","from":{"id":1},"message":{"reply_markup":{"inline_keyboard":[[],[{"text":""}]]}},"data":"x"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var u Update
		if json.Unmarshal(raw, &u) != nil {
			return
		}
		in, ok := u.Inbound(time.Unix(0, 0))
		if !ok {
			return
		}
		if in.SenderID == "" || in.Text == "" || in.ReplyTo == "" || in.SentAt.IsZero() || in.ExternalID == "" {
			t.Fatalf("accepted %+v from %s", in, raw)
		}
		if (in.Type == conversation.TypePostback) != (in.Postback != nil) || in.Postback != nil && in.Postback.Payload == "" {
			t.Fatalf("postback %+v from %s", in, raw)
		}
	})
}
