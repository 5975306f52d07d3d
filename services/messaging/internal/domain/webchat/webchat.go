// Package webchat holds the rules of the website chat widget: who a visitor
// is (a server-issued, signed visitor token), what a visitor may send, and
// which button taps are genuine. The widget page, its streams and the relay
// between instances are adapters and ports; nothing here does I/O.
package webchat

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Limits of what a visitor sends.
const (
	// MaxTextLength is the longest visitor message, as for every send.
	MaxTextLength = conversation.MaxTextLength
	// MaxNameLength bounds the name a visitor (or the embedding site)
	// gives.
	MaxNameLength = 80
	// MaxClientMessageID bounds the widget's own id of a message.
	MaxClientMessageID = 64
	// MaxPayloadLength is the longest button payload a tap may carry
	// (Messenger's postback payload limit).
	MaxPayloadLength = 1000
	// PostbackLookback is how many of the conversation's latest messages
	// are searched for the button a tap names.
	PostbackLookback = 100
	// maxTokenLength bounds what is parsed as a token.
	maxTokenLength = 256
)

// ErrInvalidToken is a visitor token that is missing, malformed, or not
// signed with this channel's secret.
var ErrInvalidToken = errors.New("the visitor token is missing or not valid for this channel")

// Visitor is one person chatting through a channel's widget. Their id is
// the contact's sender_id and where replies are pushed.
type Visitor struct {
	ID string
}

// DefaultName is the contact name of a visitor who gave none: "Visitor"
// and the last four characters of the id (the random end of a UUIDv7, so
// visitors who arrive together are told apart).
func (v Visitor) DefaultName() string {
	return "Visitor " + v.ID[len(v.ID)-4:]
}

// Session is a visitor and the token the widget keeps for them.
type Session struct {
	Visitor Visitor
	Token   string
	// ExpiresAt is when the token stops being taken (WEBCHAT_TOKEN_TTL
	// after it was issued); before then the widget trades it for a fresh
	// one of the same visitor, so a returning visitor keeps their thread.
	ExpiresAt time.Time
}

// tokenContext separates these MACs from any other use of a channel's
// secret (Telegram compares the secret itself; nothing else signs with it).
// v2 tokens carry their expiry.
const tokenContext = "parley webchat visitor v2"

// IssueToken returns the token of visitorID on ch, good until expires:
// "<visitor_id>.<expiry, Unix seconds>.<HMAC-SHA256 of both, keyed with the
// channel's secret>". The server keeps no session state; a token is good on
// one channel only, and rotating the channel's secret ends every visitor's
// session.
func IssueToken(ch channel.Channel, visitorID string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return visitorID + "." + exp + "." + sign(ch, visitorID, exp)
}

// ParseToken returns the visitor a token names on ch, or ErrInvalidToken
// (also for a token that expired at or before now).
func ParseToken(ch channel.Channel, token string, now time.Time) (Visitor, error) {
	if token == "" || len(token) > maxTokenLength || ch.Secret == "" {
		return Visitor{}, ErrInvalidToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Visitor{}, ErrInvalidToken
	}
	id, exp, sig := parts[0], parts[1], parts[2]
	if !channel.IsID(id) || id != strings.ToLower(id) {
		return Visitor{}, ErrInvalidToken
	}
	if !hmac.Equal([]byte(sig), []byte(sign(ch, id, exp))) {
		return Visitor{}, ErrInvalidToken
	}
	// Checked after the signature: only the server's own expiry is read.
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return Visitor{}, ErrInvalidToken
	}
	return Visitor{ID: id}, nil
}

func sign(ch channel.Channel, visitorID, expires string) string {
	mac := hmac.New(sha256.New, []byte(ch.Secret))
	mac.Write([]byte(tokenContext + "\n" + ch.ID + "\n" + visitorID + "\n" + expires))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// MessageKey is the ingress dedupe key of a visitor's message: a retried
// POST with the same client id is stored once. The visitor id is part of it
// so that one visitor's ids can never swallow another's messages.
func MessageKey(v Visitor, clientID string) string {
	return "webchat:msg:" + v.ID + ":" + clientID
}

// PostbackKey is the ingress dedupe key of a visitor's button tap.
func PostbackKey(v Visitor, clientID string) string {
	return "webchat:postback:" + v.ID + ":" + clientID
}

// VisitorMessage is a text a visitor typed, or a quick reply they tapped.
type VisitorMessage struct {
	Text string
	// ClientMessageID is the widget's id of the message; a retry carries
	// the same one. Empty: the server makes one (no retry protection).
	ClientMessageID string
	// Name is the name the visitor gave, if any.
	Name string
	// QuickReplyPayload is set when the text is a quick reply the visitor
	// tapped (the reply's text; webchat quick replies carry no other
	// payload).
	QuickReplyPayload string
}

// Validate checks m and trims its name.
func (m *VisitorMessage) Validate() error {
	if strings.TrimSpace(m.Text) == "" {
		return &conversation.FieldError{Field: "text", Reason: "is required"}
	}
	if n := utf8.RuneCountInString(m.Text); n > MaxTextLength {
		return &conversation.FieldError{Field: "text", Reason: fmt.Sprintf("must be at most %d characters (got %d)", MaxTextLength, n)}
	}
	if m.QuickReplyPayload != "" && utf8.RuneCountInString(m.QuickReplyPayload) > conversation.MaxQuickReplyLength {
		return &conversation.FieldError{Field: "quick_reply_payload", Reason: fmt.Sprintf("must be at most %d characters", conversation.MaxQuickReplyLength)}
	}
	if err := checkClientID(m.ClientMessageID); err != nil {
		return err
	}
	name, err := checkName(m.Name)
	m.Name = name
	return err
}

// VisitorPostback is a postback button the visitor tapped.
type VisitorPostback struct {
	Payload         string
	ClientMessageID string
	Name            string
}

// Validate checks p and trims its name.
func (p *VisitorPostback) Validate() error {
	if p.Payload == "" {
		return &conversation.FieldError{Field: "payload", Reason: "is required"}
	}
	if n := utf8.RuneCountInString(p.Payload); n > MaxPayloadLength {
		return &conversation.FieldError{Field: "payload", Reason: fmt.Sprintf("must be at most %d characters (got %d)", MaxPayloadLength, n)}
	}
	if err := checkClientID(p.ClientMessageID); err != nil {
		return err
	}
	name, err := checkName(p.Name)
	p.Name = name
	return err
}

var clientIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func checkClientID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > MaxClientMessageID || !clientIDPattern.MatchString(id) {
		return &conversation.FieldError{Field: "client_message_id", Reason: fmt.Sprintf("must be 1 to %d characters of A-Z, a-z, 0-9, _ and -", MaxClientMessageID)}
	}
	return nil
}

func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > MaxNameLength {
		return "", &conversation.FieldError{Field: "name", Reason: fmt.Sprintf("must be at most %d characters", MaxNameLength)}
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return "", &conversation.FieldError{Field: "name", Reason: "must not contain control characters"}
	}
	return name, nil
}

// ErrUnknownPayload is a tap on a button the conversation was never sent.
var ErrUnknownPayload = &conversation.FieldError{Field: "payload", Reason: "is not the payload of a postback button sent in this conversation"}

// FindPostback returns the postback button with payload among the buttons
// the channel sent in msgs (text buttons and carousel cards' buttons, as
// their metadata stores them). A visitor could post any payload; only one
// the developer sent may reach the webhook as postback.received
// (docs/webhooks.md: the payload is that of a button the developer
// sent).
func FindPostback(msgs []conversation.Message, payload string) (conversation.Button, bool) {
	for _, m := range msgs {
		if m.Sender == conversation.SenderContact {
			continue
		}
		if b, ok := findIn(m.Metadata["buttons"], payload); ok {
			return b, true
		}
		for _, card := range MetadataObjects(m.Metadata["elements"]) {
			if b, ok := findIn(card["buttons"], payload); ok {
				return b, true
			}
		}
	}
	return conversation.Button{}, false
}

func findIn(buttons any, payload string) (conversation.Button, bool) {
	for _, b := range MetadataObjects(buttons) {
		typ, _ := b["type"].(string)
		p, _ := b["payload"].(string)
		if typ == conversation.ButtonTypePostback && p == payload {
			title, _ := b["title"].(string)
			return conversation.Button{Type: typ, Title: title, Payload: p}, true
		}
	}
	return conversation.Button{}, false
}

// MetadataObjects reads a metadata list of objects (buttons, carousel
// elements), as decoded from JSON ([]any) or as a send built it
// ([]map[string]any).
func MetadataObjects(v any) []map[string]any {
	switch list := v.(type) {
	case []map[string]any:
		return list
	case []any:
		out := make([]map[string]any, 0, len(list))
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// Conversations finds a visitor's conversation.
type Conversations interface {
	// OfVisitor returns the conversation of the channel with the visitor
	// whose id is visitorID; conversation.ErrNotFound before their first
	// message.
	OfVisitor(ctx context.Context, channelID, visitorID string) (conversation.Conversation, error)
}
