package telegram

import (
	"errors"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// TestCallbackDataUpTo64Bytes holds both edges of the Bot API's
// callback_data limit (docs/limits-and-errors.md "Sending and comments"),
// counted in bytes: 64 go out as the button's callback_data, 65 are
// refused naming the button's payload.
func TestCallbackDataUpTo64Bytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		payload   string
		wantField string
	}{
		{"64 ASCII bytes", strings.Repeat("p", MaxCallbackData), ""},
		{"64 bytes in 32 characters", strings.Repeat("ü", MaxCallbackData/2), ""},
		{"65 ASCII bytes", strings.Repeat("p", MaxCallbackData+1), "buttons[1].payload"},
		{"65 bytes in 33 characters", strings.Repeat("ü", MaxCallbackData/2) + "p", "buttons[1].payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			buttons := []conversation.Button{
				{Type: conversation.ButtonTypeWebURL, Title: "Site", URL: "https://shop.example"},
				{Type: conversation.ButtonTypePostback, Title: "Buy", Payload: tt.payload},
			}
			markup, err := inlineKeyboard(buttons, "buttons")
			if tt.wantField == "" {
				if err != nil || markup == nil || markup.InlineKeyboard[1][0].CallbackData != tt.payload {
					t.Fatalf("inlineKeyboard = %+v, %v; want the payload as callback_data", markup, err)
				}
				return
			}
			var fe *conversation.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Reason, "64 bytes") {
				t.Fatalf("inlineKeyboard = %+v, %v; want a field error on %s naming 64 bytes", markup, err, tt.wantField)
			}
		})
	}
}
