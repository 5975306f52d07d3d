package adapters

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// JetStreamPublisher publishes outbox rows to their streams: customer
// events to the events stream, chat turns to the chat stream.
type JetStreamPublisher struct {
	js      jetstream.JetStream
	streams []natsx.EventsStream
}

var _ outbox.Publisher = (*JetStreamPublisher)(nil)

// NewJetStreamPublisher publishes through js into streams, each row into
// the one whose subjects its subject is among.
func NewJetStreamPublisher(js jetstream.JetStream, streams ...natsx.EventsStream) *JetStreamPublisher {
	return &JetStreamPublisher{js: js, streams: streams}
}

// streamOf names the stream that takes subject: the publish expects it,
// so that a row never lands in another stream that happens to take its
// subject too. "" when none of ours does (the publish then fails).
func (p *JetStreamPublisher) streamOf(subject string) string {
	for _, s := range p.streams {
		if strings.HasPrefix(subject, s.SubjectPrefix+".") {
			return s.Name
		}
	}
	return ""
}

// PublishBatch implements outbox.Publisher: each event goes with its id
// as Nats-Msg-Id, all of them before the first acknowledgement is awaited,
// so a batch costs one round trip to the server rather than one per event.
// A repeat within the stream's duplicate window is acknowledged without
// being stored again.
func (p *JetStreamPublisher) PublishBatch(ctx context.Context, events []outbox.Event) (int, error) {
	acks := make([]jetstream.PubAckFuture, 0, len(events))
	var sendErr error
	for _, e := range events {
		msg := nats.NewMsg(e.Subject)
		msg.Data = e.Payload
		msg.Header.Set(jetstream.MsgIDHeader, e.ID)
		stream := p.streamOf(e.Subject)
		if stream == "" {
			sendErr = fmt.Errorf("publish event %s: no stream takes subject %s", e.ID, e.Subject)
			break
		}
		ack, err := p.js.PublishMsgAsync(msg, jetstream.WithExpectStream(stream))
		if err != nil {
			sendErr = fmt.Errorf("publish event %s to %s: %w", e.ID, e.Subject, err)
			break
		}
		acks = append(acks, ack)
	}
	for i, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return i, fmt.Errorf("publish event %s to %s: %w", events[i].ID, events[i].Subject, err)
		case <-ctx.Done():
			return i, fmt.Errorf("publish event %s to %s: %w", events[i].ID, events[i].Subject, ctx.Err())
		}
	}
	return len(acks), sendErr
}
