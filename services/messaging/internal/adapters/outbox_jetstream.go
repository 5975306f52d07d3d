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

// Publish sends the event with its id as Nats-Msg-Id and waits for the
// stream's ack. A repeat within the stream's duplicate window is
// acknowledged without being stored again.
func (p *JetStreamPublisher) Publish(ctx context.Context, e outbox.Event) error {
	msg := nats.NewMsg(e.Subject)
	msg.Data = e.Payload
	msg.Header.Set(jetstream.MsgIDHeader, e.ID)
	if _, err := p.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(p.stream)); err != nil {
		return fmt.Errorf("publish event %s to %s: %w", e.ID, e.Subject, err)
	}
	return nil
}
