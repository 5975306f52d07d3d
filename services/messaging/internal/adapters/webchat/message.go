// Package webchat delivers replies to the website widget: the Transport
// publishes each reply on the visitor's NATS subject, and the Bus relays
// what those subjects carry to the widget streams (SSE) this instance
// holds, so a reply sent by any messaging instance reaches the visitor's
// open widgets on every other one.
package webchat

import (
	"time"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	webchatdomain "github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

// FromStored is a stored message as the widget shows it; sent messages
// keep their buttons, quick replies and cards in metadata (see
// conversation.OutboundText.Metadata and OutboundCarousel.Metadata).
func FromStored(m conversation.Message) messagingapi.WebchatMessage {
	id := m.ExternalID
	if id == "" {
		id = m.ID
	}
	out := messagingapi.WebchatMessage{ID: id, Sender: string(m.Sender), Type: m.Type, CreatedAt: httpx.Timestamp(m.CreatedAt)}
	switch m.Type {
	case conversation.TypeImage:
		out.ImageURL, _ = m.Metadata["image_url"].(string)
		if out.ImageURL == "" {
			out.ImageURL = m.Content
		}
	case conversation.TypeCarousel:
		out.Ratio, _ = m.Metadata["ratio"].(string)
		for _, e := range webchatdomain.MetadataObjects(m.Metadata["elements"]) {
			c := messagingapi.Card{Buttons: buttonsOf(e["buttons"])}
			c.Title, _ = e["title"].(string)
			c.Subtitle, _ = e["subtitle"].(string)
			c.ImageURL, _ = e["image_url"].(string)
			out.Cards = append(out.Cards, c)
		}
	default:
		out.Text = m.Content
		out.Buttons = buttonsOf(m.Metadata["buttons"])
		out.QuickReplies = stringsOf(m.Metadata["quick_replies"])
	}
	return out
}

// textMessage is a text reply as the Transport pushes it.
func textMessage(id string, sender conversation.Sender, at time.Time, o conversation.OutboundText) messagingapi.WebchatMessage {
	return messagingapi.WebchatMessage{
		ID: id, Sender: string(sender), Type: conversation.TypeText, Text: o.Text,
		QuickReplies: o.QuickReplies, Buttons: APIButtons(o.Buttons), CreatedAt: httpx.Timestamp(at),
	}
}

// imageMessage is an image as the Transport pushes it.
func imageMessage(id string, sender conversation.Sender, at time.Time, imageURL string) messagingapi.WebchatMessage {
	return messagingapi.WebchatMessage{
		ID: id, Sender: string(sender), Type: conversation.TypeImage,
		ImageURL: imageURL, CreatedAt: httpx.Timestamp(at),
	}
}

// carouselMessage is a carousel as the Transport pushes it.
func carouselMessage(id string, sender conversation.Sender, at time.Time, o conversation.OutboundCarousel) messagingapi.WebchatMessage {
	ratio := o.Ratio
	if ratio == "" {
		ratio = conversation.RatioHorizontal
	}
	return messagingapi.WebchatMessage{
		ID: id, Sender: string(sender), Type: conversation.TypeCarousel,
		Cards: APICards(o.Elements), Ratio: ratio, CreatedAt: httpx.Timestamp(at),
	}
}

// APICards are a carousel's cards in the API's shape, as the widget shows
// them and the admin routes render a drafted carousel.
func APICards(elements []conversation.Card) []messagingapi.Card {
	cards := make([]messagingapi.Card, len(elements))
	for i, e := range elements {
		cards[i] = messagingapi.Card{Title: e.Title, Subtitle: e.Subtitle, ImageURL: e.ImageURL, Buttons: APIButtons(e.Buttons)}
	}
	return cards
}

// APIButtons are buttons in the API's shape, as the widget shows them and
// the admin routes render a drafted message; nil for none.
func APIButtons(bs []conversation.Button) []messagingapi.Button {
	if len(bs) == 0 {
		return nil
	}
	out := make([]messagingapi.Button, len(bs))
	for i, b := range bs {
		out[i] = messagingapi.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload}
	}
	return out
}

func buttonsOf(v any) []messagingapi.Button {
	var out []messagingapi.Button
	for _, b := range webchatdomain.MetadataObjects(v) {
		var btn messagingapi.Button
		btn.Type, _ = b["type"].(string)
		btn.Title, _ = b["title"].(string)
		btn.URL, _ = b["url"].(string)
		btn.Payload, _ = b["payload"].(string)
		out = append(out, btn)
	}
	return out
}

func stringsOf(v any) []string {
	switch list := v.(type) {
	case []string:
		return list
	case []any:
		var out []string
		for _, item := range list {
			if s, ok := item.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
