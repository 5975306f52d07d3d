package meta

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Limits of Meta's Send API that are stricter than Parley's own: Meta
// refuses a message over them, so Parley answers 400 naming the field
// instead of sending.
const (
	// MaxMessengerText is a Messenger text message's length in characters.
	MaxMessengerText = 2000
	// MaxButtonTemplateText is the text above a button template's buttons.
	MaxButtonTemplateText = 640
	// MaxInstagramTextBytes is an Instagram text message's length, in UTF-8
	// bytes.
	MaxInstagramTextBytes = 1000
	// MaxButtonTitle is a template button's title, in characters.
	MaxButtonTitle = 20
	// MaxPayload is a postback button's or quick reply's payload.
	MaxPayload = 1000
)

// Values of the Send API.
const (
	messagesPath          = "/me/messages"
	messagingTypeResponse = "RESPONSE"
	senderActionTypingOn  = "typing_on"
	contentTypeText       = "text"
	attachmentTemplate    = "template"
	attachmentImage       = "image"
	templateTypeButton    = "button"
	templateTypeGeneric   = "generic"
)

// Transport sends to Messenger and Instagram customers through the Send API
// (POST /me/messages with the channel's page token). Both platforms take
// the same requests; Instagram refuses the button template and images that
// are not JPEG or PNG, which Transport turns into field errors before
// anything is sent.
type Transport struct {
	graph *Graph
}

var (
	_ conversation.Transport   = (*Transport)(nil)
	_ conversation.TextChecker = (*Transport)(nil)
)

// NewTransport returns the Messenger and Instagram transport over g.
func NewTransport(g *Graph) *Transport { return &Transport{graph: g} }

// sendRequest is the Send API's body.
type sendRequest struct {
	Recipient     recipient    `json:"recipient"`
	MessagingType string       `json:"messaging_type,omitempty"`
	Message       *sendMessage `json:"message,omitempty"`
	SenderAction  string       `json:"sender_action,omitempty"`
}

type recipient struct {
	ID string `json:"id"`
}

type sendMessage struct {
	Text         string          `json:"text,omitempty"`
	QuickReplies []quickReply    `json:"quick_replies,omitempty"`
	Attachment   *sendAttachment `json:"attachment,omitempty"`
}

type quickReply struct {
	ContentType string `json:"content_type"`
	Title       string `json:"title"`
	Payload     string `json:"payload"`
}

type sendAttachment struct {
	Type    string `json:"type"`
	Payload any    `json:"payload"`
}

type imagePayload struct {
	URL        string `json:"url"`
	IsReusable bool   `json:"is_reusable"`
}

type buttonTemplate struct {
	TemplateType string           `json:"template_type"`
	Text         string           `json:"text"`
	Buttons      []templateButton `json:"buttons"`
}

type genericTemplate struct {
	TemplateType     string           `json:"template_type"`
	ImageAspectRatio string           `json:"image_aspect_ratio"`
	Elements         []genericElement `json:"elements"`
}

type genericElement struct {
	Title    string           `json:"title"`
	Subtitle string           `json:"subtitle,omitempty"`
	ImageURL string           `json:"image_url,omitempty"`
	Buttons  []templateButton `json:"buttons,omitempty"`
}

// templateButton is a web_url {type, url, title} or postback {type, title,
// payload} button.
type templateButton struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	URL     string `json:"url,omitempty"`
	Payload string `json:"payload,omitempty"`
}

// sendResponse is the Send API's answer.
type sendResponse struct {
	RecipientID string `json:"recipient_id"`
	MessageID   string `json:"message_id"`
}

// SendText sends a text; quick replies become message.quick_replies (the
// payload is the reply's text, which Meta sends back as
// quick_reply.payload); buttons become a button template on Messenger and
// are refused on Instagram.
func (t *Transport) SendText(ctx context.Context, to conversation.Target, o conversation.OutboundText) (conversation.Sent, error) {
	msg, err := textMessage(to.Channel.Kind, o)
	if err != nil {
		return conversation.Sent{}, err
	}
	return t.send(ctx, to, msg)
}

// CheckText implements conversation.TextChecker: Meta's text rules, checked
// before the image of an image-then-text send goes out.
func (t *Transport) CheckText(to conversation.Target, o conversation.OutboundText) error {
	_, err := textMessage(to.Channel.Kind, o)
	return err
}

// textMessage translates o for the Send API, or says why Meta would refuse it.
func textMessage(kind channel.Kind, o conversation.OutboundText) (*sendMessage, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	msg := &sendMessage{}
	if len(o.Buttons) > 0 {
		if kind == channel.KindInstagram {
			return nil, &conversation.FieldError{Field: "buttons", Reason: "are not supported on instagram (it has no button template); use quick_replies"}
		}
		if n := utf8.RuneCountInString(o.Text); n > MaxButtonTemplateText {
			return nil, &conversation.FieldError{Field: "text", Reason: fmt.Sprintf("must be at most %d characters with buttons on messenger (got %d)", MaxButtonTemplateText, n)}
		}
		buttons, err := templateButtons(o.Buttons, "buttons")
		if err != nil {
			return nil, err
		}
		msg.Attachment = &sendAttachment{Type: attachmentTemplate, Payload: buttonTemplate{
			TemplateType: templateTypeButton, Text: o.Text, Buttons: buttons,
		}}
		return msg, nil
	}
	if err := checkText(kind, o.Text); err != nil {
		return nil, err
	}
	msg.Text = o.Text
	for _, q := range o.QuickReplies {
		msg.QuickReplies = append(msg.QuickReplies, quickReply{ContentType: contentTypeText, Title: q, Payload: q})
	}
	return msg, nil
}

// SendImage sends the image as an attachment Meta fetches from the URL.
func (t *Transport) SendImage(ctx context.Context, to conversation.Target, imageURL string) (conversation.Sent, error) {
	if err := checkKind(to.Channel.Kind); err != nil {
		return conversation.Sent{}, err
	}
	if err := checkImage(to.Channel.Kind, imageURL, "image_url"); err != nil {
		return conversation.Sent{}, err
	}
	return t.send(ctx, to, &sendMessage{Attachment: &sendAttachment{
		Type: attachmentImage, Payload: imagePayload{URL: imageURL, IsReusable: true},
	}})
}

// SendCarousel sends the cards as one generic template with the carousel's
// image_aspect_ratio.
func (t *Transport) SendCarousel(ctx context.Context, to conversation.Target, o conversation.OutboundCarousel) ([]conversation.Sent, error) {
	kind := to.Channel.Kind
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	ratio := o.Ratio
	if ratio == "" {
		ratio = conversation.RatioHorizontal
	}
	elements := make([]genericElement, len(o.Elements))
	for i, card := range o.Elements {
		field := fmt.Sprintf("elements[%d]", i)
		if card.Subtitle == "" && card.ImageURL == "" && len(card.Buttons) == 0 {
			// Meta refuses such a card: "Incomplete element data".
			return nil, &conversation.FieldError{Field: field, Reason: "needs a subtitle, image_url or buttons besides its title on " + string(kind)}
		}
		if card.ImageURL != "" {
			if err := checkImage(kind, card.ImageURL, field+".image_url"); err != nil {
				return nil, err
			}
		}
		buttons, err := templateButtons(card.Buttons, field+".buttons")
		if err != nil {
			return nil, err
		}
		elements[i] = genericElement{Title: card.Title, Subtitle: card.Subtitle, ImageURL: card.ImageURL, Buttons: buttons}
	}
	sent, err := t.send(ctx, to, &sendMessage{Attachment: &sendAttachment{Type: attachmentTemplate, Payload: genericTemplate{
		TemplateType: templateTypeGeneric, ImageAspectRatio: ratio, Elements: elements,
	}}})
	if err != nil {
		return nil, err
	}
	return []conversation.Sent{sent}, nil
}

// SendTyping turns the typing indicator on (Meta turns it off after 20
// seconds or with the next message).
func (t *Transport) SendTyping(ctx context.Context, to conversation.Target) error {
	if err := checkKind(to.Channel.Kind); err != nil {
		return err
	}
	req := sendRequest{Recipient: recipient{ID: to.Conversation.ReplyTo}, SenderAction: senderActionTypingOn}
	return t.graph.Call(ctx, to.Channel.Kind, to.Channel.Token, messagesPath, req, nil)
}

// send posts one message in answer to the customer (messaging_type
// RESPONSE: within the messaging window, which prepareSend has checked).
func (t *Transport) send(ctx context.Context, to conversation.Target, msg *sendMessage) (conversation.Sent, error) {
	req := sendRequest{Recipient: recipient{ID: to.Conversation.ReplyTo}, MessagingType: messagingTypeResponse, Message: msg}
	var resp sendResponse
	if err := t.graph.Call(ctx, to.Channel.Kind, to.Channel.Token, messagesPath, req, &resp); err != nil {
		return conversation.Sent{}, err
	}
	if resp.MessageID == "" {
		return conversation.Sent{}, refused(to.Channel.Kind, 0, "meta accepted the message without a message_id")
	}
	return conversation.Sent{ExternalID: resp.MessageID}, nil
}

func checkKind(kind channel.Kind) error {
	if kind != channel.KindMessenger && kind != channel.KindInstagram {
		return &conversation.UnsupportedPlatformError{Platform: kind}
	}
	return nil
}

// checkText applies each platform's text limit: Messenger counts
// characters, Instagram bytes.
func checkText(kind channel.Kind, text string) error {
	if kind == channel.KindInstagram {
		if n := len(text); n > MaxInstagramTextBytes {
			return &conversation.FieldError{Field: "text", Reason: fmt.Sprintf("must be at most %d bytes (UTF-8) on instagram (got %d)", MaxInstagramTextBytes, n)}
		}
		return nil
	}
	if n := utf8.RuneCountInString(text); n > MaxMessengerText {
		return &conversation.FieldError{Field: "text", Reason: fmt.Sprintf("must be at most %d characters on messenger (got %d)", MaxMessengerText, n)}
	}
	return nil
}

// templateButtons translates buttons for a button or generic template.
func templateButtons(buttons []conversation.Button, field string) ([]templateButton, error) {
	var out []templateButton
	for i, b := range buttons {
		f := fmt.Sprintf("%s[%d]", field, i)
		if n := utf8.RuneCountInString(b.Title); n > MaxButtonTitle {
			return nil, &conversation.FieldError{Field: f + ".title", Reason: fmt.Sprintf("must be at most %d characters on meta (got %d)", MaxButtonTitle, n)}
		}
		tb := templateButton{Type: b.Type, Title: b.Title}
		switch b.Type {
		case conversation.ButtonTypeWebURL:
			tb.URL = b.URL
		case conversation.ButtonTypePostback:
			if n := utf8.RuneCountInString(b.Payload); n > MaxPayload {
				return nil, &conversation.FieldError{Field: f + ".payload", Reason: fmt.Sprintf("must be at most %d characters on meta (got %d)", MaxPayload, n)}
			}
			tb.Payload = b.Payload
		}
		out = append(out, tb)
	}
	return out, nil
}

// otherMediaExtensions name media formats that are not JPEG or PNG (.jpg,
// .jpeg, .png): an Instagram image URL ending in one of them is refused
// without sending.
var otherMediaExtensions = map[string]bool{
	".gif": true, ".webp": true, ".bmp": true, ".tif": true, ".tiff": true, ".heic": true, ".heif": true,
	".avif": true, ".svg": true, ".svgz": true, ".ico": true, ".jxl": true, ".jp2": true, ".apng": true,
	".mp4": true, ".mov": true, ".webm": true, ".avi": true, ".ogg": true, ".mp3": true, ".wav": true,
	".m4a": true, ".aac": true, ".pdf": true,
}

// checkImage applies Instagram's rule that images are JPEG or PNG, as far
// as the URL tells without fetching it: the extension of the URL's path
// (case-insensitive) must be .jpg, .jpeg or .png when it names a media
// format. A URL without an extension, or with one that names no media
// format (/image.php?id=7, /photos/123), cannot be judged here; it is sent,
// and if Meta finds it is not JPEG or PNG its refusal is a platform_error.
// Messenger takes any image format Meta can fetch.
func checkImage(kind channel.Kind, imageURL, field string) error {
	if kind != channel.KindInstagram {
		return nil
	}
	u, err := url.Parse(imageURL)
	if err != nil {
		return nil // the shared validation has refused non-URLs already
	}
	ext := strings.ToLower(path.Ext(u.Path))
	if otherMediaExtensions[ext] {
		return &conversation.FieldError{Field: field, Reason: fmt.Sprintf("must be a JPEG or PNG image on instagram (the URL's file ends in %s)", ext)}
	}
	return nil
}
