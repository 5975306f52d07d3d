package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

// Webchat is the website widget's use cases: new visitors and their tokens,
// visitor messages and button taps (received like any platform's, through
// Receive), and the thread a widget shows when it loads.
type Webchat struct {
	app      *App
	visitors webchat.Conversations
	// tokenTTL is how long a visitor token is taken (WEBCHAT_TOKEN_TTL).
	tokenTTL time.Duration
}

// WebchatDeps are what the widget's use cases need.
type WebchatDeps struct {
	// App receives the visitors' messages as every platform's, and holds
	// the channels, the inbox and the clock.
	App *App
	// Visitors finds a visitor's conversation.
	Visitors webchat.Conversations
	// TokenTTL is how long a visitor token is taken (WEBCHAT_TOKEN_TTL).
	TokenTTL time.Duration
}

// NewWebchat returns the widget's use cases over d.
func NewWebchat(d WebchatDeps) *Webchat {
	return &Webchat{app: d.App, visitors: d.Visitors, tokenTTL: d.TokenTTL}
}

// Channel returns the webchat channel with id; channel.ErrNotFound when
// there is none, or it is on another platform.
func (w *Webchat) Channel(ctx context.Context, id string) (channel.Channel, error) {
	return w.app.ChannelOfKind(ctx, id, channel.KindWebchat)
}

// NewVisitor makes a visitor for ch and their token. Nothing is stored: the
// contact and conversation appear with the visitor's first message.
func (w *Webchat) NewVisitor(ch channel.Channel) webchat.Session {
	return w.session(ch, webchat.Visitor{ID: w.app.newID()})
}

// Renew gives the visitor of a token that is still good a fresh one, so a
// visitor who keeps coming back keeps their conversation while a token that
// leaked stops working WEBCHAT_TOKEN_TTL after it was issued, unless it is
// renewed; webchat.ErrInvalidToken for a token that is not good.
func (w *Webchat) Renew(ch channel.Channel, token string) (webchat.Session, error) {
	v, err := w.Visitor(ch, token)
	if err != nil {
		return webchat.Session{}, err
	}
	return w.session(ch, v), nil
}

func (w *Webchat) session(ch channel.Channel, v webchat.Visitor) webchat.Session {
	expires := w.app.now().Add(w.tokenTTL).Truncate(time.Second)
	return webchat.Session{Visitor: v, Token: webchat.IssueToken(ch, v.ID, expires), ExpiresAt: expires}
}

// Visitor returns the visitor a token names on ch, or
// webchat.ErrInvalidToken (also once it expired).
func (w *Webchat) Visitor(ch channel.Channel, token string) (webchat.Visitor, error) {
	return webchat.ParseToken(ch, token, w.app.now())
}

// Received is a visitor message as stored (or as stored before, for a
// retry).
type Received struct {
	Message conversation.Message
	// Duplicate is a retry of a message stored before; nothing new was
	// stored or forwarded.
	Duplicate bool
}

// Say receives a visitor's message: stored once per client_message_id, and
// forwarded as message.received when the channel is in external mode.
func (w *Webchat) Say(ctx context.Context, ch channel.Channel, v webchat.Visitor, m webchat.VisitorMessage) (Received, error) {
	if err := m.Validate(); err != nil {
		return Received{}, err
	}
	id := m.ClientMessageID
	if id == "" {
		id = w.app.newID()
	}
	in := w.inbound(v, m.Name, id)
	in.Type, in.Text = conversation.TypeText, m.Text
	if m.QuickReplyPayload != "" {
		in.Metadata = map[string]any{"quick_reply_payload": m.QuickReplyPayload}
	}
	return w.receive(ctx, ch, webchat.MessageKey(v, id), in)
}

// Tap receives a visitor's tap on a postback button, forwarded as
// postback.received. The payload must be one of the postback buttons the
// conversation was sent lately (a *conversation.FieldError otherwise), and
// the stored message carries that button's title.
func (w *Webchat) Tap(ctx context.Context, ch channel.Channel, v webchat.Visitor, p webchat.VisitorPostback) (Received, error) {
	if err := p.Validate(); err != nil {
		return Received{}, err
	}
	conv, err := w.visitors.OfVisitor(ctx, ch.ID, v.ID)
	if errors.Is(err, conversation.ErrNotFound) {
		return Received{}, webchat.ErrUnknownPayload
	}
	if err != nil {
		return Received{}, err
	}
	recent, err := w.app.inbox.ListMessages(ctx, conversation.MessageQuery{ConversationID: conv.ID, Limit: webchat.PostbackLookback})
	if err != nil {
		return Received{}, err
	}
	button, ok := webchat.FindPostback(recent, p.Payload)
	if !ok {
		return Received{}, webchat.ErrUnknownPayload
	}
	id := p.ClientMessageID
	if id == "" {
		id = w.app.newID()
	}
	in := w.inbound(v, p.Name, id)
	in.Type, in.Text = conversation.TypePostback, button.Title
	in.Postback = &conversation.Postback{Payload: button.Payload}
	return w.receive(ctx, ch, webchat.PostbackKey(v, id), in)
}

func (w *Webchat) inbound(v webchat.Visitor, name, externalID string) *conversation.Inbound {
	if name == "" {
		name = v.DefaultName()
	}
	return &conversation.Inbound{
		SenderID: v.ID, SenderName: name, ReplyTo: v.ID,
		ExternalID: externalID, SentAt: w.app.timestamp(),
	}
}

func (w *Webchat) receive(ctx context.Context, ch channel.Channel, key string, in *conversation.Inbound) (Received, error) {
	outcome, err := w.app.Receive(ctx, ch, key, in)
	if err != nil {
		return Received{}, err
	}
	msg := conversation.Message{
		WorkspaceID: ch.WorkspaceID, Sender: conversation.SenderContact, Type: in.Type,
		Content: in.Text, Metadata: inboundMetadata(in), ExternalID: in.ExternalID, CreatedAt: in.SentAt,
	}
	return Received{Message: msg, Duplicate: outcome == IngressDuplicate}, nil
}

// History returns the latest limit messages of the visitor's conversation,
// oldest first; none before the visitor's first message.
func (w *Webchat) History(ctx context.Context, ch channel.Channel, v webchat.Visitor, limit int) ([]conversation.Message, error) {
	conv, err := w.visitors.OfVisitor(ctx, ch.ID, v.ID)
	if errors.Is(err, conversation.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msgs, err := w.app.inbox.ListMessages(ctx, conversation.MessageQuery{ConversationID: conv.ID, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("history of visitor %s: %w", v.ID, err)
	}
	slices.Reverse(msgs)
	return msgs, nil
}
