package conversation

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// Limits of what may be sent (docs/limits-and-errors.md "Sending and
// comments").
const (
	MaxTextLength       = 4096
	MaxButtons          = 3
	MaxQuickReplies     = 13
	MaxQuickReplyLength = 20
	MaxCarouselElements = 10
	MaxCardTitleLength  = 80
	MaxCardSubtitle     = 80
)

// Carousel image ratios (Messenger's image_aspect_ratio).
const (
	RatioHorizontal = "horizontal"
	RatioSquare     = "square"
)

// Button types.
const (
	ButtonTypeWebURL   = "web_url"
	ButtonTypePostback = "postback"
)

const (
	fieldQuickReplies = "quick_replies"
	fieldButtons      = "buttons"
	fieldElements     = "elements"
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

// OutboundImage is an image, then optionally a text as a separate message
// (POST /v1/image).
type OutboundImage struct {
	ImageURL string
	Text     string
}

// Validate checks the rules every platform shares.
func (o OutboundImage) Validate() error {
	if o.ImageURL == "" {
		return &FieldError{"image_url", reasonRequired}
	}
	if !IsHTTPSURL(o.ImageURL) {
		return &FieldError{"image_url", "must be an https URL"}
	}
	// The text is optional, but one sent is a message of its own: not
	// blank, as on POST /v1/messages.
	if o.Text != "" && strings.TrimSpace(o.Text) == "" {
		return &FieldError{"text", "must not be blank (omit it to send the image alone)"}
	}
	if n := utf8.RuneCountInString(o.Text); n > MaxTextLength {
		return &FieldError{"text", fmt.Sprintf("must be at most %d characters (got %d)", MaxTextLength, n)}
	}
	return nil
}

// Card is one element of a carousel.
type Card struct {
	Title    string
	Subtitle string
	ImageURL string
	Buttons  []Button
}

// OutboundCarousel is a row of cards (POST /v1/carousel).
type OutboundCarousel struct {
	Elements []Card
	// Ratio is the cards' image ratio: horizontal (the default) or square.
	Ratio string
}

// Validate checks the rules every platform shares and fills the default
// ratio.
func (o *OutboundCarousel) Validate() error {
	if len(o.Elements) == 0 {
		return &FieldError{fieldElements, "must have at least one element"}
	}
	if len(o.Elements) > MaxCarouselElements {
		return &FieldError{fieldElements, fmt.Sprintf("must have at most %d elements (got %d)", MaxCarouselElements, len(o.Elements))}
	}
	switch o.Ratio {
	case "":
		o.Ratio = RatioHorizontal
	case RatioHorizontal, RatioSquare:
	default:
		return &FieldError{"ratio", "must be horizontal or square"}
	}
	for i, c := range o.Elements {
		field := fmt.Sprintf("%s[%d]", fieldElements, i)
		if strings.TrimSpace(c.Title) == "" {
			return &FieldError{field + ".title", reasonRequired}
		}
		if n := utf8.RuneCountInString(c.Title); n > MaxCardTitleLength {
			return &FieldError{field + ".title", fmt.Sprintf("must be at most %d characters (got %d)", MaxCardTitleLength, n)}
		}
		if n := utf8.RuneCountInString(c.Subtitle); n > MaxCardSubtitle {
			return &FieldError{field + ".subtitle", fmt.Sprintf("must be at most %d characters (got %d)", MaxCardSubtitle, n)}
		}
		if c.ImageURL != "" && !IsHTTPSURL(c.ImageURL) {
			return &FieldError{field + ".image_url", "must be an https URL"}
		}
		if len(c.Buttons) > MaxButtons {
			return &FieldError{field + ".buttons", fmt.Sprintf("must have at most %d buttons (got %d)", MaxButtons, len(c.Buttons))}
		}
		for j, b := range c.Buttons {
			if err := b.validate(fmt.Sprintf("%s.buttons[%d]", field, j)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Metadata is what a sent carousel stores, shaped as the API shows it.
func (o OutboundCarousel) Metadata() map[string]any {
	elements := make([]map[string]any, len(o.Elements))
	for i, c := range o.Elements {
		e := map[string]any{"title": c.Title}
		if c.Subtitle != "" {
			e["subtitle"] = c.Subtitle
		}
		if c.ImageURL != "" {
			e["image_url"] = c.ImageURL
		}
		if len(c.Buttons) > 0 {
			e[fieldButtons] = buttonsMetadata(c.Buttons)
		}
		elements[i] = e
	}
	return map[string]any{fieldElements: elements, "ratio": o.Ratio}
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
		md[fieldButtons] = buttonsMetadata(o.Buttons)
	}
	if len(o.QuickReplies) > 0 {
		md[fieldQuickReplies] = o.QuickReplies
	}
	return md
}

func buttonsMetadata(buttons []Button) []map[string]any {
	out := make([]map[string]any, len(buttons))
	for i, b := range buttons {
		m := map[string]any{"type": b.Type, "title": b.Title}
		if b.URL != "" {
			m["url"] = b.URL
		}
		if b.Payload != "" {
			m["payload"] = b.Payload
		}
		out[i] = m
	}
	return out
}

// Target is where a platform delivers a reply: the channel (its token) and
// the conversation (the chat to reply to), and who the reply is from, for
// a platform that shows it (the widget).
type Target struct {
	Channel      channel.Channel
	Conversation Conversation
	Sender       Sender
}

// Sent is the platform's receipt for a delivered message.
type Sent struct {
	// ExternalID is the platform's id of the message.
	ExternalID string
}

// Transport sends on one platform. Each platform has its own; a platform
// without one cannot be sent to yet (UnsupportedPlatformError). Every method
// returns a *FieldError for input this platform cannot take (Instagram and
// buttons), ErrOutsideWindow when the platform itself refuses for its
// messaging window, and a *PlatformError when the platform refuses otherwise
// or cannot be reached; nothing was delivered in any of those cases. Only a
// *PartlySentError says some of a send was.
type Transport interface {
	// SendText delivers o to the customer of to.Conversation.
	SendText(ctx context.Context, to Target, o OutboundText) (Sent, error)
	// SendImage delivers the image at the https URL imageURL.
	SendImage(ctx context.Context, to Target, imageURL string) (Sent, error)
	// SendCarousel delivers the cards; platforms without a carousel send
	// several messages, the first one's id first, and a failure after the
	// first of them is a *PartlySentError.
	SendCarousel(ctx context.Context, to Target, c OutboundCarousel) ([]Sent, error)
	// SendTyping shows the customer a typing indicator.
	SendTyping(ctx context.Context, to Target) error
}

// TextChecker is implemented by transports whose platform has text rules
// beyond the shared ones, so that a send of several messages (the image,
// then its text) refuses before the first one goes out.
type TextChecker interface {
	CheckText(to Target, o OutboundText) error
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

// PartlySentError is a send of several platform messages (a carousel on
// Telegram, one message per card) that failed after the first of them were
// delivered: the customer has Sent. Err says what failed (a
// *PlatformError, usually).
type PartlySentError struct {
	Sent []Sent
	Err  error
}

func (e *PartlySentError) Error() string { return e.Err.Error() }
func (e *PartlySentError) Unwrap() error { return e.Err }

// ErrOutsideWindow is a send to a Messenger or Instagram customer whose last
// message is older than the messaging window (docs/sending.md): nothing
// was sent.
var ErrOutsideWindow = errors.New("outside the messaging window after the customer's last message")

// HasWindow reports whether sends on platform k are bound to the messaging
// window after the customer's last message.
func HasWindow(k channel.Kind) bool {
	return k == channel.KindMessenger || k == channel.KindInstagram
}

// CheckWindow returns ErrOutsideWindow when a send to conv at now falls
// outside window after the customer's last message, as the platform
// timestamped it. Platforms without a window always pass.
func CheckWindow(conv Conversation, now time.Time, window time.Duration) error {
	if !HasWindow(conv.Platform) {
		return nil
	}
	if conv.LastCustomerMessageAt.IsZero() || now.Sub(conv.LastCustomerMessageAt) > window {
		return ErrOutsideWindow
	}
	return nil
}

// UnsupportedPlatformError is a send to a platform Parley cannot send to yet.
type UnsupportedPlatformError struct {
	Platform channel.Kind
}

func (e *UnsupportedPlatformError) Error() string {
	return fmt.Sprintf("sending to %s conversations is not supported yet", e.Platform)
}
