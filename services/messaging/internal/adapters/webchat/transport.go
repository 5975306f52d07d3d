package webchat

import (
	"context"
	"time"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Transport sends replies to webchat visitors: each is published on the
// visitor's subject for their open widgets, and stored by the app whether
// or not a widget is open (the widget shows it from the history when it
// loads). The conversation's reply_to is the visitor id.
type Transport struct {
	bus   *Bus
	newID func() string
	now   func() time.Time
}

var _ conversation.Transport = (*Transport)(nil)

// NewTransport returns the webchat transport over bus.
func NewTransport(bus *Bus) *Transport {
	return &Transport{bus: bus, newID: uuid.NewString, now: time.Now}
}

// SendText pushes a text with its quick replies (chips) or buttons.
func (t *Transport) SendText(_ context.Context, to conversation.Target, o conversation.OutboundText) (conversation.Sent, error) {
	id := t.newID()
	return conversation.Sent{ExternalID: id}, t.push(to, messagingapi.WebchatEventMessage, textMessage(id, senderOf(to), t.now(), o))
}

// SendImage pushes an image; the app sends the text after it.
func (t *Transport) SendImage(_ context.Context, to conversation.Target, imageURL string) (conversation.Sent, error) {
	id := t.newID()
	return conversation.Sent{ExternalID: id}, t.push(to, messagingapi.WebchatEventMessage, imageMessage(id, senderOf(to), t.now(), imageURL))
}

// SendCarousel pushes the cards as one message.
func (t *Transport) SendCarousel(_ context.Context, to conversation.Target, c conversation.OutboundCarousel) ([]conversation.Sent, error) {
	id := t.newID()
	if err := t.push(to, messagingapi.WebchatEventMessage, carouselMessage(id, senderOf(to), t.now(), c)); err != nil {
		return nil, err
	}
	return []conversation.Sent{{ExternalID: id}}, nil
}

// SendTyping shows the visitor's open widgets a typing indicator.
func (t *Transport) SendTyping(_ context.Context, to conversation.Target) error {
	return t.push(to, messagingapi.WebchatEventTyping, nil)
}

// senderOf is who a reply to is from, as the widget shows it (the same
// as the history): the API's sends name none and are the user's.
func senderOf(to conversation.Target) conversation.Sender {
	if to.Sender == "" {
		return conversation.SenderUser
	}
	return to.Sender
}

func (t *Transport) push(to conversation.Target, event string, data any) error {
	visitor := to.Conversation.ReplyTo
	if !channel.IsID(visitor) || !channel.IsID(to.Channel.ID) {
		return &conversation.PlatformError{Platform: channel.KindWebchat, Description: "the conversation has no webchat visitor to reply to"}
	}
	if err := t.bus.Publish(to.Channel.ID, visitor, event, data); err != nil {
		return &conversation.PlatformError{Platform: channel.KindWebchat, Description: "the widget relay is unavailable"}
	}
	return nil
}
