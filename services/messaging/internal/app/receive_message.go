package app

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// Event types messaging publishes.
const (
	EventMessageReceived  = "message.received"
	EventPostbackReceived = "postback.received"
	EventCommentReceived  = "comment.received"
)

// ChannelOfKind returns the channel with id if it is on platform kind;
// channel.ErrNotFound when there is none, or it is on another platform.
// It may be a moment old (Deps.RecentChannels): it is read for every
// delivery.
func (a *App) ChannelOfKind(ctx context.Context, id string, kind channel.Kind) (channel.Channel, error) {
	ch, err := a.recent.Get(ctx, id)
	if err != nil {
		return channel.Channel{}, err
	}
	if ch.Kind != kind {
		return channel.Channel{}, channel.ErrNotFound
	}
	return ch, nil
}

// ChannelByExternalID returns the channel of kind whose platform id is
// externalID; channel.ErrNotFound when there is none. It may be a moment
// old, as ChannelOfKind.
func (a *App) ChannelByExternalID(ctx context.Context, kind channel.Kind, externalID string) (channel.Channel, error) {
	return a.recent.GetByExternalID(ctx, kind, externalID)
}

// Receive stores one platform delivery, named key (unique per channel: a
// Telegram update_id, a Meta mid), once: a repeat does nothing. in is the
// customer message it carries, nil for deliveries only recorded as seen.
// One transaction (which concurrent deliveries may share) holds the
// dedupe claim, the contact, conversation and message, and for channels
// in external mode the customer event, or when the built-in AI answers it
// the chat turn; Receive returns once it is committed, with the ingress
// outcome.
func (a *App) Receive(ctx context.Context, ch channel.Channel, key string, in *conversation.Inbound) (string, error) {
	d := conversation.Delivery{ChannelID: ch.ID, Key: key}
	if in != nil {
		in.SentAt = a.platformTime(in.SentAt)
		d.Conversation = &conversation.Conversation{
			WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID, Platform: ch.Kind,
			Contact: conversation.Contact{
				WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID,
				SenderID: in.SenderID, Name: in.SenderName, ProfilePic: in.ProfilePic,
			},
			ReplyTo: in.ReplyTo, LastMessageAt: in.SentAt, LastCustomerMessageAt: in.SentAt,
		}
		d.NewID = a.newID
		d.Store = func(conv conversation.Conversation) (conversation.Stored, error) {
			return a.storeInbound(ch, conv, in)
		}
	}
	got, err := a.inbox.Receive(ctx, d)
	outcome := IngressStored
	switch {
	case err != nil:
		err = fmt.Errorf("receive on channel %s: %w", ch.ID, err)
	case !got.Fresh:
		outcome = IngressDuplicate
	case in == nil:
		outcome = IngressIgnored
	default:
		a.inboxChanged(got.Conversation.WorkspaceID, got.Conversation.ID)
	}
	return a.received(ch, outcome, got.Stored.Events(), err)
}

// storeInbound decides what the customer message in stores in its stored
// conversation conv: the message, and its chat turn when the built-in AI
// answers it, else the customer event when the channel forwards events.
// The mode is read with the channel for this delivery, so a change
// applies from the next message; the handover with the conversation's
// row, which the store holds locked.
func (a *App) storeInbound(ch channel.Channel, conv conversation.Conversation, in *conversation.Inbound) (conversation.Stored, error) {
	msg := conversation.Message{
		ID: a.newID(), WorkspaceID: ch.WorkspaceID, ConversationID: conv.ID,
		Sender: conversation.SenderContact, Type: in.Type, Content: in.Text,
		Metadata: inboundMetadata(in), ExternalID: in.ExternalID, CreatedAt: in.SentAt,
	}
	out := conversation.Stored{Message: msg}
	if seq, ok := conv.NextTurn(ch); ok {
		turn, err := a.chatTurn(ch, conv, msg, in, seq)
		if err != nil {
			return conversation.Stored{}, err
		}
		out.Turn = &turn
		return out, nil
	}
	if ch.ForwardsEvents() {
		ev, err := a.customerEvent(ch, conv, msg, in)
		if err != nil {
			return conversation.Stored{}, err
		}
		out.Event = &ev
	}
	return out, nil
}

// received closes a receive transaction's bookkeeping: the ingress outcome
// is counted, and the events it committed (written) go to the relay to be
// published at once.
func (a *App) received(ch channel.Channel, outcome string, written []outbox.Event, err error) (string, error) {
	if err != nil {
		a.observer.Ingress(string(ch.Kind), IngressError)
		return "", err
	}
	a.observer.Ingress(string(ch.Kind), outcome)
	a.publish(written)
	return outcome, nil
}

// inboundMetadata is what a customer message stores besides its text: the
// attachment, the postback payload, and what the platform adapter added.
func inboundMetadata(in *conversation.Inbound) map[string]any {
	md := map[string]any{}
	for k, v := range in.Metadata {
		md[k] = v
	}
	if in.Attachment != nil {
		md["attachment"] = map[string]any{"url": in.Attachment.URL, "type": in.Attachment.Type}
	}
	if in.Postback != nil {
		md["payload"] = in.Postback.Payload
	}
	return md
}

// customerMessage is a stored customer message as events and chat turns
// carry it: its channel, its contact, the message, and the button's
// payload when it is a postback.
type customerMessage struct {
	channel  *eventsv1.Channel
	contact  *eventsv1.Contact
	message  *eventsv1.Message
	postback *eventsv1.Postback
}

func newCustomerMessage(ch channel.Channel, contact conversation.Contact, msg conversation.Message, in *conversation.Inbound) customerMessage {
	out := customerMessage{
		channel: &eventsv1.Channel{Kind: string(ch.Kind), ExternalId: ch.ExternalID},
		contact: &eventsv1.Contact{Id: contact.ID, SenderId: contact.SenderID, Name: contact.Name, ProfilePic: contact.ProfilePic},
		message: &eventsv1.Message{
			Id: msg.ID, Text: msg.Content, Type: msg.Type, ExternalId: msg.ExternalID,
			CreatedAt: timestamppb.New(msg.CreatedAt),
		},
	}
	if in.Attachment != nil {
		out.message.Attachment = &eventsv1.Attachment{Url: in.Attachment.URL, Type: in.Attachment.Type}
	}
	if in.Postback != nil {
		out.postback = &eventsv1.Postback{Payload: in.Postback.Payload, ReceivedAt: timestamppb.New(msg.CreatedAt)}
	}
	return out
}

// customerEvent builds message.received, or postback.received for a tapped
// button, with every data field docs/webhooks.md documents.
func (a *App) customerEvent(ch channel.Channel, conv conversation.Conversation, msg conversation.Message, in *conversation.Inbound) (outbox.Event, error) {
	m := newCustomerMessage(ch, conv.Contact, msg, in)
	ev := &eventsv1.Event{Id: a.newID(), WorkspaceId: ch.WorkspaceID}
	if m.postback != nil {
		ev.Type = EventPostbackReceived
		ev.Data = &eventsv1.Event_PostbackReceived{PostbackReceived: &eventsv1.PostbackReceived{
			WorkspaceId: ch.WorkspaceID, ConversationId: conv.ID, Platform: string(conv.Platform),
			Channel: m.channel, Contact: m.contact, Message: m.message, Postback: m.postback,
		}}
	} else {
		ev.Type = EventMessageReceived
		ev.Data = &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId: ch.WorkspaceID, ConversationId: conv.ID, Platform: string(conv.Platform),
			Channel: m.channel, Contact: m.contact, Message: m.message,
		}}
	}
	return a.outboxEvent(ev)
}

// outboxEvent stamps ev and encodes it for the outbox, on the subject of its
// workspace and type.
func (a *App) outboxEvent(ev *eventsv1.Event) (outbox.Event, error) {
	if a.eventSubject == nil {
		return outbox.Event{}, errors.New("no event subject configured")
	}
	now := a.timestamp()
	ev.CreatedAt = timestamppb.New(now)
	payload, err := proto.Marshal(ev)
	if err != nil {
		return outbox.Event{}, fmt.Errorf("encode event: %w", err)
	}
	return outbox.Event{
		ID:        ev.GetId(),
		Subject:   a.eventSubject(ev.GetWorkspaceId(), ev.GetType()),
		Payload:   payload,
		CreatedAt: now,
	}, nil
}
