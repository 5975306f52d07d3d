package meta

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// TestSendAtMetasLimitsGoesOut is the other edge of
// TestSendRefusedBeforeSending: a message exactly at each of Meta's limits
// (docs/limits-and-errors.md "Sending and comments") is sent, counted as
// the limit counts it: Messenger's texts, button titles and payloads in
// characters (here of two bytes each), Instagram's text in bytes.
func TestSendAtMetasLimitsGoesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chars := func(n int) string { return strings.Repeat("ü", n) }
	post := func(title, payload string) conversation.Button {
		return conversation.Button{Type: conversation.ButtonTypePostback, Title: title, Payload: payload}
	}
	tests := []struct {
		name string
		send func(tr *Transport) error
	}{
		{"messenger text of 2000 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: chars(MaxMessengerText)})
			return err
		}},
		{"instagram text of 1000 bytes", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindInstagram), conversation.OutboundText{Text: chars(MaxInstagramTextBytes / 2)})
			return err
		}},
		{"button template text of 640 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: chars(MaxButtonTemplateText), Buttons: []conversation.Button{post("Buy", "B")}})
			return err
		}},
		{"button title of 20 characters", func(tr *Transport) error {
			_, err := tr.SendText(ctx, target(channel.KindMessenger), conversation.OutboundText{Text: "x", Buttons: []conversation.Button{post(chars(MaxButtonTitle), "B")}})
			return err
		}},
		{"postback payload of 1000 characters", func(tr *Transport) error {
			_, err := tr.SendCarousel(ctx, target(channel.KindMessenger), conversation.OutboundCarousel{Elements: []conversation.Card{
				{Title: "t", Buttons: []conversation.Button{post("P", chars(MaxPayload))}}}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, f := newTestTransport(t)
			if err := tt.send(tr); err != nil {
				t.Fatalf("send at the limit: %v", err)
			}
			if n := len(f.received()); n != 1 {
				t.Fatalf("meta got %d calls, want the 1 send", n)
			}
		})
	}
}
