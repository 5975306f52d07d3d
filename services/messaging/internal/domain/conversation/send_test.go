package conversation

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

func TestOutboundTextValidate(t *testing.T) {
	t.Parallel()
	link := Button{Type: ButtonTypeWebURL, Title: "Open", URL: "https://example.com/x"}
	post := Button{Type: ButtonTypePostback, Title: "Yes", Payload: "YES"}
	tests := []struct {
		name      string
		give      OutboundText
		wantField string
	}{
		{"plain text", OutboundText{Text: "hi"}, ""},
		{"4096 runes", OutboundText{Text: strings.Repeat("日", MaxTextLength)}, ""},
		{"three buttons", OutboundText{Text: "t", Buttons: []Button{link, post, post}}, ""},
		{"thirteen quick replies of 20", OutboundText{Text: "t", QuickReplies: repeat(strings.Repeat("ü", 20), 13)}, ""},
		{"empty text", OutboundText{}, "text"},
		{"blank text", OutboundText{Text: " \t"}, "text"},
		{"4097 runes", OutboundText{Text: strings.Repeat("a", MaxTextLength+1)}, "text"},
		{"both kinds", OutboundText{Text: "t", QuickReplies: []string{"a"}, Buttons: []Button{post}}, "quick_replies"},
		{"four buttons", OutboundText{Text: "t", Buttons: []Button{post, post, post, post}}, "buttons"},
		{"untitled", OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypePostback, Payload: "p"}}}, "buttons[0].title"},
		{"no type", OutboundText{Text: "t", Buttons: []Button{post, {Title: "x"}}}, "buttons[1].type"},
		{"bad type", OutboundText{Text: "t", Buttons: []Button{{Type: "call", Title: "x"}}}, "buttons[0].type"},
		{"http url", OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypeWebURL, Title: "x", URL: "http://example.com"}}}, "buttons[0].url"},
		{"relative url", OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypeWebURL, Title: "x", URL: "/path"}}}, "buttons[0].url"},
		{"url with credentials", OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypeWebURL, Title: "x", URL: "https://u:p@example.com"}}}, "buttons[0].url"},
		{"no payload", OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypePostback, Title: "x"}}}, "buttons[0].payload"},
		{"fourteen quick replies", OutboundText{Text: "t", QuickReplies: repeat("q", 14)}, "quick_replies"},
		{"long quick reply", OutboundText{Text: "t", QuickReplies: []string{"ok", strings.Repeat("x", 21)}}, "quick_replies[1]"},
		{"empty quick reply", OutboundText{Text: "t", QuickReplies: []string{" "}}, "quick_replies[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantField(t, tt.give.Validate(), tt.wantField)
		})
	}
}

// wantField fails t unless err is nil when field is empty, else a
// *FieldError on field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("Validate = %v", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Fatalf("Validate = %v, want a FieldError on %s", err, field)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestOutboundTextMetadata(t *testing.T) {
	t.Parallel()
	if md := (OutboundText{Text: "t"}).Metadata(); len(md) != 0 {
		t.Fatalf("plain text metadata = %v", md)
	}
	md := OutboundText{Text: "t", Buttons: []Button{{Type: ButtonTypeWebURL, Title: "Go", URL: "https://x.y"}}}.Metadata()
	b := md["buttons"].([]map[string]any)
	if len(b) != 1 || b[0]["url"] != "https://x.y" || b[0]["title"] != "Go" || b[0]["type"] != "web_url" {
		t.Fatalf("metadata = %v", md)
	}
	if _, has := b[0]["payload"]; has {
		t.Fatal("empty payload rendered")
	}
}

// TestOutboundCarouselLimits holds each carousel limit at its bound and
// one past it (docs/limits-and-errors.md "Sending and comments").
func TestOutboundCarouselLimits(t *testing.T) {
	t.Parallel()
	post := Button{Type: ButtonTypePostback, Title: "Yes", Payload: "YES"}
	cards := func(n int) []Card {
		out := make([]Card, n)
		for i := range out {
			out[i] = Card{Title: "Card"}
		}
		return out
	}
	tests := []struct {
		name      string
		give      OutboundCarousel
		wantField string
	}{
		{"one element", OutboundCarousel{Elements: cards(1)}, ""},
		{"ten elements", OutboundCarousel{Elements: cards(MaxCarouselElements)}, ""},
		{"title of 80 characters", OutboundCarousel{Elements: []Card{{Title: strings.Repeat("ü", MaxCardTitleLength)}}}, ""},
		{"subtitle of 80 characters", OutboundCarousel{Elements: []Card{{Title: "t", Subtitle: strings.Repeat("日", MaxCardSubtitle)}}}, ""},
		{"three buttons on a card", OutboundCarousel{Elements: []Card{{Title: "t", Buttons: []Button{post, post, post}}}}, ""},
		{"no elements", OutboundCarousel{}, "elements"},
		{"eleven elements", OutboundCarousel{Elements: cards(MaxCarouselElements + 1)}, "elements"},
		{"title of 81 characters", OutboundCarousel{Elements: []Card{{Title: strings.Repeat("ü", MaxCardTitleLength+1)}}}, "elements[0].title"},
		{"subtitle of 81 characters", OutboundCarousel{Elements: []Card{{Title: "t", Subtitle: strings.Repeat("日", MaxCardSubtitle+1)}}}, "elements[0].subtitle"},
		{"four buttons on a card", OutboundCarousel{Elements: []Card{{Title: "t"}, {Title: "t", Buttons: []Button{post, post, post, post}}}}, "elements[1].buttons"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantField(t, tt.give.Validate(), tt.wantField)
		})
	}
}

// TestCheckWindow: a send is inside the messaging window up to and
// including its last instant, counted from the customer's last message
// alone, on Messenger and Instagram only.
func TestCheckWindow(t *testing.T) {
	t.Parallel()
	const window = 24 * time.Hour
	last := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		platform channel.Kind
		last     time.Time
		now      time.Time
		want     error
	}{
		{"just after the customer wrote", channel.KindMessenger, last, last.Add(time.Minute), nil},
		{"the window's last instant", channel.KindMessenger, last, last.Add(window), nil},
		{"just past the window", channel.KindMessenger, last, last.Add(window + time.Nanosecond), ErrOutsideWindow},
		{"instagram at the window's end", channel.KindInstagram, last, last.Add(window), nil},
		{"instagram past it", channel.KindInstagram, last, last.Add(window + time.Second), ErrOutsideWindow},
		{"a customer who never wrote", channel.KindMessenger, time.Time{}, last, ErrOutsideWindow},
		{"telegram has no window", channel.KindTelegram, last, last.Add(30 * 24 * time.Hour), nil},
		{"webchat has no window", channel.KindWebchat, time.Time{}, last, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The conversation's own last message is a send made just
			// now: only the customer's messages count for the window.
			conv := Conversation{Platform: tt.platform, LastMessageAt: tt.now, LastCustomerMessageAt: tt.last}
			if err := CheckWindow(conv, tt.now, window); !errors.Is(err, tt.want) {
				t.Fatalf("CheckWindow = %v, want %v", err, tt.want)
			}
		})
	}
}
