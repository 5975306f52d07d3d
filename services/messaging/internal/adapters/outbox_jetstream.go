package adapters

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// JetStreamPublisher publishes outbox events to the events stream.
type JetStreamPublisher struct {
	js     jetstream.JetStream
	stream string
}

var _ outbox.Publisher = (*JetStreamPublisher)(nil)

// NewJetStreamPublisher publishes through js into the stream named stream.
func NewJetStreamPublisher(js jetstream.JetStream, stream string) *JetStreamPublisher {
	return &JetStreamPublisher{js: js, stream: stream}
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
		ack, err := p.js.PublishMsgAsync(msg, jetstream.WithExpectStream(p.stream))
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
