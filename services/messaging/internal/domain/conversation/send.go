package conversation

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// Limits of a sent text message (specification §8, ARCHITECTURE.md §4).
const (
	MaxTextLength       = 4096
	MaxButtons          = 3
	MaxQuickReplies     = 13
	MaxQuickReplyLength = 20
)

// Button types of the specification.
const (
	ButtonTypeWebURL   = "web_url"
	ButtonTypePostback = "postback"
)

const (
	fieldQuickReplies = "quick_replies"
	fieldButtons      = "buttons"
	reasonRequired    = "is required"
)

// Button is a button under a sent message: a link (web_url) or a postback
// whose payload comes back to the developer when the customer taps it.
type Button struct {
	Type    string
	Title   string
	URL     string
	Payload string
}

// OutboundText is a text message to send, with optional quick replies or
// buttons (never both).
type OutboundText struct {
	Text         string
	QuickReplies []string
	Buttons      []Button
}

// FieldError is input that breaks a rule; Field names it as the API client
// wrote it (buttons[1].url).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Reason }

// Validate checks the rules every platform shares.
func (o OutboundText) Validate() error {
	if strings.TrimSpace(o.Text) == "" {
		return &FieldError{"text", reasonRequired}
	}
	if n := utf8.RuneCountInString(o.Text); n > MaxTextLength {
		return &FieldError{"text", fmt.Sprintf("must be at most %d characters (got %d)", MaxTextLength, n)}
	}
	if len(o.QuickReplies) > 0 && len(o.Buttons) > 0 {
		return &FieldError{fieldQuickReplies, "cannot be combined with buttons"}
	}
	if len(o.Buttons) > MaxButtons {
		return &FieldError{fieldButtons, fmt.Sprintf("must have at most %d buttons (got %d)", MaxButtons, len(o.Buttons))}
	}
	for i, b := range o.Buttons {
		if err := b.validate(fmt.Sprintf("%s[%d]", fieldButtons, i)); err != nil {
			return err
		}
	}
	if len(o.QuickReplies) > MaxQuickReplies {
		return &FieldError{fieldQuickReplies, fmt.Sprintf("must have at most %d items (got %d)", MaxQuickReplies, len(o.QuickReplies))}
	}
	for i, q := range o.QuickReplies {
		field := fmt.Sprintf("%s[%d]", fieldQuickReplies, i)
		if strings.TrimSpace(q) == "" {
			return &FieldError{field, "must not be empty"}
		}
		if n := utf8.RuneCountInString(q); n > MaxQuickReplyLength {
			return &FieldError{field, fmt.Sprintf("must be at most %d characters (got %d)", MaxQuickReplyLength, n)}
		}
	}
	return nil
}

func (b Button) validate(field string) error {
	if strings.TrimSpace(b.Title) == "" {
		return &FieldError{field + ".title", reasonRequired}
	}
	switch b.Type {
	case ButtonTypeWebURL:
		if !IsHTTPSURL(b.URL) {
			return &FieldError{field + ".url", "must be an https URL"}
		}
	case ButtonTypePostback:
		if b.Payload == "" {
			return &FieldError{field + ".payload", reasonRequired}
		}
	case "":
		return &FieldError{field + ".type", reasonRequired + " (web_url or postback)"}
	default:
		return &FieldError{field + ".type", "must be web_url or postback"}
	}
	return nil
}

// IsHTTPSURL reports whether s is an absolute https URL with a host.
func IsHTTPSURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil
}

// Metadata is what a sent message stores besides its text, shaped as the
// API shows it.
func (o OutboundText) Metadata() map[string]any {
	md := map[string]any{}
	if len(o.Buttons) > 0 {
		bs := make([]map[string]any, len(o.Buttons))
		for i, b := range o.Buttons {
			m := map[string]any{"type": b.Type, "title": b.Title}
			if b.URL != "" {
				m["url"] = b.URL
			}
			if b.Payload != "" {
				m["payload"] = b.Payload
			}
			bs[i] = m
		}
		md[fieldButtons] = bs
	}
	if len(o.QuickReplies) > 0 {
		md[fieldQuickReplies] = o.QuickReplies
	}
	return md
}

// Target is where a platform delivers a reply: the channel (its token) and
// the conversation (the chat to reply to).
type Target struct {
	Channel      channel.Channel
	Conversation Conversation
}

// Sent is the platform's receipt for a delivered message.
type Sent struct {
	// ExternalID is the platform's id of the message.
	ExternalID string
}

// Transport sends messages on one platform. Each platform has its own; a
// platform without one cannot be sent to yet (UnsupportedPlatformError).
type Transport interface {
	// SendText delivers o to the customer of to.Conversation. It returns a
	// *FieldError for input this platform cannot take and a *PlatformError
	// when the platform refuses or cannot be reached; nothing was delivered
	// in either case.
	SendText(ctx context.Context, to Target, o OutboundText) (Sent, error)
}

// PlatformError is a platform that refused a send or could not be reached.
type PlatformError struct {
	Platform channel.Kind
	// Code is the platform's error code, 0 when it was not reached.
	Code int
	// Description is the platform's reason, safe to show to the developer.
	Description string
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("%s refused the message: %s", e.Platform, e.Description)
}

// UnsupportedPlatformError is a send to a platform Parley cannot send to yet.
type UnsupportedPlatformError struct {
	Platform channel.Kind
}

func (e *UnsupportedPlatformError) Error() string {
	return fmt.Sprintf("sending to %s conversations is not supported yet", e.Platform)
}
