package webchat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

var (
	chA = channel.Channel{ID: "0193b1d4-0000-7000-8000-00000000000a", Kind: channel.KindWebchat, Secret: "secret-a"}
	chB = channel.Channel{ID: "0193b1d4-0000-7000-8000-00000000000b", Kind: channel.KindWebchat, Secret: "secret-a"}
)

const visitorID = "0193b1d4-1111-7222-8333-444455556666"

// expiry is a token's end in these tests: 2027-01-15T08:00:00Z.
var expiry = time.Unix(1800000000, 0)

func TestTokenGolden(t *testing.T) {
	t.Parallel()
	// HMAC-SHA256("secret-a", "parley webchat visitor v2\n<channel>\n<visitor>\n<expiry>"), base64url
	// (computed with openssl dgst -sha256 -hmac). A change here ends every visitor's session: do it on purpose only.
	const want = visitorID + ".1800000000.LSnqIlo5fc4OQw_QLfX-nPrMUxLT41PSTx5XDYiuqsg"
	if got := webchat.IssueToken(chA, visitorID, expiry); got != want {
		t.Fatalf("token = %s, want %s", got, want)
	}
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	now := expiry.Add(-time.Hour)
	good := webchat.IssueToken(chA, visitorID, expiry)
	v, err := webchat.ParseToken(chA, good, now)
	if err != nil || v.ID != visitorID {
		t.Fatalf("ParseToken(good) = %+v, %v", v, err)
	}
	if v, err := webchat.ParseToken(chA, good, expiry.Add(-time.Second)); err != nil || v.ID != visitorID {
		t.Fatalf("a second before expiry = %+v, %v", v, err)
	}
	sig := good[strings.Index(good, "."):]
	lastDot := strings.LastIndex(good, ".")
	rotated := chA
	rotated.Secret = "secret-b"
	tests := []struct {
		name  string
		ch    channel.Channel
		token string
		now   time.Time
	}{
		{"empty", chA, "", now},
		{"no signature", chA, visitorID, now},
		{"empty signature", chA, visitorID + ".1800000000.", now},
		{"wrong signature", chA, visitorID + ".1800000000.AAAA", now},
		{"v1 token without expiry", chA, visitorID + ".Ry1LLj7TMiWOFq4pUQitAq6R8IRKbRCBN6lLAy51VRc", now},
		{"expired", chA, good, expiry},
		{"long expired", chA, good, expiry.Add(24 * time.Hour)},
		{"expiry pushed back", chA, visitorID + ".1900000000" + good[lastDot:], now},
		{"other visitor", chA, "0193b1d4-1111-7222-8333-444455556667" + sig, now},
		{"upper-case id", chA, strings.ToUpper(visitorID) + sig, now},
		{"not an id", chA, "visitor" + sig, now},
		{"other channel, same secret", chB, good, now},
		{"rotated secret", rotated, good, now},
		{"channel without secret", channel.Channel{ID: chA.ID}, good, now},
		{"too long", chA, good + strings.Repeat("A", 300), now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := webchat.ParseToken(tt.ch, tt.token, tt.now); !errors.Is(err, webchat.ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrInvalidToken", err)
			}
		})
	}
}

func TestDefaultNameUsesTheRandomEnd(t *testing.T) {
	t.Parallel()
	if got := (webchat.Visitor{ID: visitorID}).DefaultName(); got != "Visitor 6666" {
		t.Fatalf("DefaultName = %q", got)
	}
}

func TestKeysAreScopedByVisitor(t *testing.T) {
	t.Parallel()
	v := webchat.Visitor{ID: visitorID}
	if got := webchat.MessageKey(v, "c1"); got != "webchat:msg:"+visitorID+":c1" {
		t.Fatalf("MessageKey = %q", got)
	}
	if got := webchat.PostbackKey(v, "c1"); got != "webchat:postback:"+visitorID+":c1" {
		t.Fatalf("PostbackKey = %q", got)
	}
}

func TestVisitorMessageValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		give      webchat.VisitorMessage
		wantField string
	}{
		{"ok", webchat.VisitorMessage{Text: "hi", ClientMessageID: "0193b1d4-aaaa_B"}, ""},
		{"longest", webchat.VisitorMessage{Text: strings.Repeat("я", 4096), ClientMessageID: strings.Repeat("a", 64)}, ""},
		{"empty", webchat.VisitorMessage{}, "text"},
		{"blank", webchat.VisitorMessage{Text: " \n"}, "text"},
		{"too long", webchat.VisitorMessage{Text: strings.Repeat("я", 4097)}, "text"},
		{"client id space", webchat.VisitorMessage{Text: "hi", ClientMessageID: "a b"}, "client_message_id"},
		{"client id long", webchat.VisitorMessage{Text: "hi", ClientMessageID: strings.Repeat("a", 65)}, "client_message_id"},
		{"name long", webchat.VisitorMessage{Text: "hi", Name: strings.Repeat("n", 81)}, "name"},
		{"name control", webchat.VisitorMessage{Text: "hi", Name: "a\nb"}, "name"},
		{"quick reply long", webchat.VisitorMessage{Text: "hi", QuickReplyPayload: strings.Repeat("q", 21)}, "quick_reply_payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := tt.give
			err := m.Validate()
			var fe *conversation.FieldError
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
				t.Fatalf("err = %v, want a FieldError on %s", err, tt.wantField)
			}
		})
	}
	m := webchat.VisitorMessage{Text: "hi", Name: "  Ada Lovelace "}
	if err := m.Validate(); err != nil || m.Name != "Ada Lovelace" {
		t.Fatalf("name = %q, %v", m.Name, err)
	}
}

func TestVisitorPostbackValidate(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]webchat.VisitorPostback{
		"no payload":   {},
		"long payload": {Payload: strings.Repeat("p", 1001)},
		"bad id":       {Payload: "X", ClientMessageID: "ü"},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if p := (webchat.VisitorPostback{Payload: strings.Repeat("p", 1000)}); p.Validate() != nil {
		t.Error("a 1000-character payload is refused")
	}
}

func TestFindPostback(t *testing.T) {
	t.Parallel()
	// Metadata as read back from the store (JSON: []any) and as a send
	// builds it ([]map[string]any).
	sent := []conversation.Message{
		{Sender: conversation.SenderContact, Metadata: map[string]any{"buttons": []any{
			map[string]any{"type": "postback", "title": "Forged", "payload": "FROM_VISITOR"},
		}}},
		{Sender: conversation.SenderUser, Metadata: map[string]any{"buttons": []any{
			map[string]any{"type": "web_url", "title": "Site", "url": "https://x.example"},
			map[string]any{"type": "postback", "title": "Talk to us", "payload": "HUMAN"},
		}}},
		{Sender: conversation.SenderUser, Metadata: map[string]any{"elements": []any{
			map[string]any{"title": "A"},
			map[string]any{"title": "B", "buttons": []any{map[string]any{"type": "postback", "title": "Buy B", "payload": "BUY_B"}}},
		}}},
		{Sender: conversation.SenderUser, Metadata: conversation.OutboundText{Text: "x", Buttons: []conversation.Button{
			{Type: "postback", Title: "Fresh", Payload: "FRESH"},
		}}.Metadata()},
	}
	tests := []struct {
		payload   string
		wantTitle string
		ok        bool
	}{
		{"HUMAN", "Talk to us", true},
		{"BUY_B", "Buy B", true},
		{"FRESH", "Fresh", true},
		{"FROM_VISITOR", "", false},
		{"https://x.example", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		b, ok := webchat.FindPostback(sent, tt.payload)
		if ok != tt.ok || b.Title != tt.wantTitle || (ok && b.Payload != tt.payload) {
			t.Errorf("FindPostback(%q) = %+v, %v", tt.payload, b, ok)
		}
	}
}
