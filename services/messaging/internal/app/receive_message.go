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

// EventMessageReceived is the event type of a customer message.
const EventMessageReceived = "message.received"

// TelegramChannel returns the telegram channel with id; channel.ErrNotFound
// when there is none, or it is on another platform.
func (a *App) TelegramChannel(ctx context.Context, id string) (channel.Channel, error) {
	ch, err := a.channels.Get(ctx, id)
	if err != nil {
		return channel.Channel{}, err
	}
	if ch.Kind != channel.KindTelegram {
		return channel.Channel{}, channel.ErrNotFound
	}
	return ch, nil
}

// ReceiveTelegramUpdate takes update updateID of a telegram channel once:
// a repeat does nothing. in is the customer message it carries, nil for
// updates that are only recorded as seen.
func (a *App) ReceiveTelegramUpdate(ctx context.Context, ch channel.Channel, updateID int64, in *conversation.Inbound) (string, error) {
	claim := func(ctx context.Context, tx conversation.ReceiveTx) (bool, error) {
		return tx.ClaimTelegramUpdate(ctx, ch.ID, updateID)
	}
	return a.receive(ctx, ch, claim, in)
}

type claimFunc func(context.Context, conversation.ReceiveTx) (bool, error)

// receive stores one platform delivery in one transaction: the dedupe
// claim, then the contact, conversation and message, and for channels in
// external mode the message.received event. It returns the ingress outcome.
func (a *App) receive(ctx context.Context, ch channel.Channel, claim claimFunc, in *conversation.Inbound) (string, error) {
	var outcome string
	wroteEvent := false
	err := a.inbox.Receive(ctx, func(tx conversation.ReceiveTx) error {
		fresh, err := claim(ctx, tx)
		if err != nil {
			return err
		}
		if !fresh {
			outcome = IngressDuplicate
			return nil
		}
		if in == nil {
			outcome = IngressIgnored
			return nil
		}
		contact, err := tx.UpsertContact(ctx, conversation.Contact{
			ID: a.newID(), WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID,
			SenderID: in.SenderID, Name: in.SenderName, ProfilePic: in.ProfilePic,
		})
		if err != nil {
			return err
		}
		conv, err := tx.UpsertConversation(ctx, conversation.Conversation{
			ID: a.newID(), WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID, Platform: ch.Kind,
			Contact: contact, ReplyTo: in.ReplyTo,
			LastMessageAt: in.SentAt, LastCustomerMessageAt: in.SentAt,
		})
		if err != nil {
			return err
		}
		msg := conversation.Message{
			ID: a.newID(), WorkspaceID: ch.WorkspaceID, ConversationID: conv.ID,
			Sender: conversation.SenderContact, Type: in.Type, Content: in.Text,
			Metadata: map[string]any{}, ExternalID: in.ExternalID, CreatedAt: in.SentAt,
		}
		if err := tx.AddMessage(ctx, msg); err != nil {
			return err
		}
		outcome = IngressStored
		// The mode is read with the channel for this delivery, so a change
		// applies from the next message.
		if !ch.ForwardsEvents() {
			return nil
		}
		ev, err := a.messageReceived(ch, conv, contact, msg)
		if err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, ev); err != nil {
			return err
		}
		wroteEvent = true
		return nil
	})
	if err != nil {
		a.metrics.Ingress(string(ch.Kind), IngressError)
		return "", fmt.Errorf("receive on channel %s: %w", ch.ID, err)
	}
	a.metrics.Ingress(string(ch.Kind), outcome)
	if wroteEvent {
		a.eventWritten()
	}
	return outcome, nil
}

// messageReceived builds the message.received event with every data field
// of the specification.
func (a *App) messageReceived(ch channel.Channel, conv conversation.Conversation, contact conversation.Contact, msg conversation.Message) (outbox.Event, error) {
	if a.eventSubject == nil {
		return outbox.Event{}, errors.New("no event subject configured")
	}
	now := a.timestamp()
	ev := &eventsv1.Event{
		Id:          a.newID(),
		Type:        EventMessageReceived,
		WorkspaceId: ch.WorkspaceID,
		CreatedAt:   timestamppb.New(now),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    ch.WorkspaceID,
			ConversationId: conv.ID,
			Platform:       string(conv.Platform),
			Channel:        &eventsv1.Channel{Kind: string(ch.Kind), ExternalId: ch.ExternalID},
			Contact: &eventsv1.Contact{
				Id: contact.ID, SenderId: contact.SenderID, Name: contact.Name, ProfilePic: contact.ProfilePic,
			},
			Message: &eventsv1.Message{
				Id: msg.ID, Text: msg.Content, Type: msg.Type, ExternalId: msg.ExternalID,
				CreatedAt: timestamppb.New(msg.CreatedAt),
			},
		}},
	}
	payload, err := proto.Marshal(ev)
	if err != nil {
		return outbox.Event{}, fmt.Errorf("encode event: %w", err)
	}
	return outbox.Event{
		ID:        ev.GetId(),
		Subject:   a.eventSubject(ch.WorkspaceID, EventMessageReceived),
		Payload:   payload,
		CreatedAt: now,
	}, nil
}
