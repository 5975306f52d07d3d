package app

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// chatTurn builds the chat turn seq of conv for the customer message msg
// (docs/architecture.md "Customer events: the outbox and the EVENTS
// stream"): the events.v1.ChatTurn the flow-runner answers, with the
// channel's mode at this moment, on the conversation's chat subject, its
// id the Nats-Msg-Id.
func (a *App) chatTurn(ch channel.Channel, conv conversation.Conversation, msg conversation.Message, in *conversation.Inbound, seq int64) (conversation.Turn, error) {
	if a.chatSubject == nil {
		return conversation.Turn{}, errors.New("no chat subject configured")
	}
	m := newCustomerMessage(ch, conv.Contact, msg, in)
	now := a.timestamp()
	turn := &eventsv1.ChatTurn{
		Id: a.newID(), WorkspaceId: ch.WorkspaceID, ConversationId: conv.ID, Seq: seq, Mode: string(ch.AIMode),
		ChannelId: ch.ID, Channel: m.channel, Contact: m.contact, Message: m.message, Postback: m.postback,
		CreatedAt: timestamppb.New(now),
	}
	payload, err := proto.Marshal(turn)
	if err != nil {
		return conversation.Turn{}, fmt.Errorf("encode chat turn: %w", err)
	}
	return conversation.Turn{Seq: seq, Event: outbox.Event{
		ID: turn.GetId(), Subject: a.chatSubject(ch.WorkspaceID, conv.ID), Payload: payload, CreatedAt: now,
	}}, nil
}
