package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
)

// HandlerFunc adapts a function that reads the delivery log before every
// round anyway (a replay), and so need not know whether the message was
// redelivered, to Handler.
type HandlerFunc func(ctx context.Context, ev *eventsv1.Event, keepAlive func()) error

// DeliverEvent implements Handler.
func (f HandlerFunc) DeliverEvent(ctx context.Context, ev *eventsv1.Event, _ bool, keepAlive func()) error {
	return f(ctx, ev, keepAlive)
}

// StartReplay consumes the replay stream (adapters/replaystream, which
// must exist) through one durable consumer that every instance shares,
// exactly as Start consumes the events: h is the replay use case, a
// request is acked once its outcome is stored, and anything transient
// (a delivery under way elsewhere included) comes back after a delay.
func StartReplay(ctx context.Context, js jetstream.JetStream, cfg Config, h Handler, log *zap.Logger) (*natsx.Consumer, error) {
	cons, err := cfg.Stream.EnsureDurable(ctx, js, natsx.Durable{
		Name:          cfg.Durable,
		Description:   "webhook dispatcher: delivers replayed events to webhooks",
		AckWait:       cfg.AckWait,
		MaxAckPending: MaxAckPending,
	})
	if err != nil {
		return nil, err
	}
	log = log.With(zap.String("queue", "replay"))
	return natsx.Consume(cons, cfg.InHand, newEvents(cfg.Stream.SubjectPrefix, 0, h, log).handle, log)
}

// Lag reads a durable consumer's backlog: messages not yet handed out
// (pending) and handed out but not acked (ack pending).
func Lag(js jetstream.JetStream, stream natsx.EventsStream, durable string) func(ctx context.Context) (pending, ackPending uint64, err error) {
	return func(ctx context.Context) (uint64, uint64, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, stream.Name, durable)
		if err != nil {
			return 0, 0, fmt.Errorf("read consumer %s on %s: %w", durable, stream.Name, err)
		}
		info := c.CachedInfo()
		return info.NumPending, uint64(max(info.NumAckPending, 0)), nil
	}
}
