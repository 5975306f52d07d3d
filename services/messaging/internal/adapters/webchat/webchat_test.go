package webchat

import (
	"encoding/json"
	"testing"
	"time"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

func TestFromStoredMatchesWhatTheTransportPushes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 10, 0, 0, 123000000, time.UTC)
	text := conversation.OutboundText{Text: "Pick", Buttons: []conversation.Button{
		{Type: "postback", Title: "A", Payload: "PA"}, {Type: "web_url", Title: "Site", URL: "https://x.example"},
	}}
	chips := conversation.OutboundText{Text: "Yes?", QuickReplies: []string{"Yes", "No"}}
	carousel := conversation.OutboundCarousel{Ratio: "square", Elements: []conversation.Card{
		{Title: "T", Subtitle: "S", ImageURL: "https://img.example/a.png", Buttons: []conversation.Button{{Type: "postback", Title: "Buy", Payload: "BUY"}}},
		{Title: "U"},
	}}
	tests := []struct {
		name   string
		pushed messagingapi.WebchatMessage
		stored conversation.Message
	}{
		{"buttons", textMessage("x1", "user", at, text),
			conversation.Message{ExternalID: "x1", Sender: "user", Type: "text", Content: "Pick", Metadata: text.Metadata(), CreatedAt: at}},
		{"quick replies", textMessage("x2", "user", at, chips),
			conversation.Message{ExternalID: "x2", Sender: "user", Type: "text", Content: "Yes?", Metadata: chips.Metadata(), CreatedAt: at}},
		{"image", imageMessage("x3", "user", at, "https://img.example/b.jpg"),
			conversation.Message{ExternalID: "x3", Sender: "user", Type: "image", Content: "https://img.example/b.jpg",
				Metadata: map[string]any{"image_url": "https://img.example/b.jpg"}, CreatedAt: at}},
		{"carousel", carouselMessage("x4", "user", at, carousel),
			conversation.Message{ExternalID: "x4", Sender: "user", Type: "carousel", Metadata: carousel.Metadata(), CreatedAt: at}},
		// The built-in AI's are its own, live as in the history.
		{"ai", textMessage("x5", "ai", at, chips),
			conversation.Message{ExternalID: "x5", Sender: "ai", Type: "text", Content: "Yes?", Metadata: chips.Metadata(), CreatedAt: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Through JSON, as the store gives metadata back.
			raw, _ := json.Marshal(tt.stored.Metadata)
			tt.stored.Metadata = map[string]any{}
			_ = json.Unmarshal(raw, &tt.stored.Metadata)
			want, _ := json.Marshal(tt.pushed)
			got, _ := json.Marshal(FromStored(tt.stored))
			if string(got) != string(want) {
				t.Fatalf("history shape %s\npushed shape  %s", got, want)
			}
		})
	}
}

func TestFromStoredVisitorMessages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	got := FromStored(conversation.Message{ID: "m1", ExternalID: "c1", Sender: "contact", Type: "postback", Content: "Talk to us",
		Metadata: map[string]any{"payload": "HUMAN"}, CreatedAt: at})
	if got.ID != "c1" || got.Text != "Talk to us" || got.Type != "postback" || got.CreatedAt != "2026-01-01T10:00:00Z" {
		t.Fatalf("postback = %+v", got)
	}
	if got := FromStored(conversation.Message{ID: "m2", Sender: "ai", Type: "text", Content: "x", CreatedAt: at}); got.ID != "m2" {
		t.Fatalf("without external id: %+v", got)
	}
}
