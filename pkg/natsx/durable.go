package natsx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Durable describes a durable pull consumer that every instance of a
// service shares on one of Parley's streams: the dispatcher's on the
// events and the replay streams, the flow-runner's on the chat stream.
type Durable struct {
	// Name names the consumer all instances share.
	Name        string
	Description string
	// AckWait is how long a message handed out waits for its ack before
	// it is handed out again (to another instance, if its holder died).
	AckWait time.Duration
	// MaxAckPending bounds the messages handed out and not yet acked,
	// across all instances.
	MaxAckPending int
}

// EnsureDurable creates the durable consumer d on the stream s (which must
// exist), or brings an existing one to these settings. It reads every
// subject of s, from the first message the stream holds: a consumer
// created on a stream that already holds messages hands them out too, so
// nothing published before the first consumer started is lost. Each
// message is acked explicitly and handed out again until it is: the
// stream's age limit is the only bound on its retries.
//
// The consumer's replicas are left to its stream's (num_replicas 0), on
// purpose. nats-server then places the consumer on the stream's servers
// and moves it with each change of the stream's replicas, up or down,
// keeping what was acked; a consumer given a count of its own does not
// follow (one of 1 stays on one server when its stream goes to 3), so a
// change of EVENTS_REPLICAS would leave it behind until every instance
// had restarted. Updating a consumer from a count of its own to 0 makes
// it follow again.
//
// An update sent while the server is still moving the consumer with its
// stream is applied to the consumer's old servers and undoes the move
// (nats-server 2.9), so EnsureDurable first waits until an existing
// consumer is on as many servers as its stream, and updates it only when
// its settings differ; then it waits until the consumer is placed.
// durable_test.go holds all this to account on a cluster.
func (s EventsStream) EnsureDurable(ctx context.Context, js jetstream.JetStream, d Durable) (jetstream.Consumer, error) {
	want := jetstream.ConsumerConfig{
		Durable:       d.Name,
		Description:   d.Description,
		FilterSubject: s.SubjectPrefix + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: d.MaxAckPending,
		Replicas:      0, // the stream's, following its changes (above)
	}
	var cons jetstream.Consumer
	// followed waits until the consumer, if it exists and follows its
	// stream, is on as many servers as the stream.
	followed := func(ctx context.Context) error {
		c, err := js.Consumer(ctx, s.Name, d.Name)
		if err != nil {
			return err
		}
		cons = c
		if c.CachedInfo().Config.Replicas != 0 {
			return nil // it follows nothing: the update below moves it
		}
		stream, err := ReadPlacement(ctx, js, Placement{Stream: s.Name})
		if err != nil {
			return err
		}
		return consumerPlacement(c.CachedInfo(), js.Conn().ConnectedServerName()).placedOn(stream.Replicas)
	}
	err := settle(ctx, followed)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons = nil
	case err != nil:
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", d.Name, s.Name, err)
	}
	if cons != nil && sameDurable(cons.CachedInfo().Config, want) {
		return cons, nil
	}
	err = settle(ctx, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(ctx, s.Name, want)
		return err
	})
	if err == nil {
		err = settle(ctx, followed)
	}
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", d.Name, s.Name, err)
	}
	return cons, nil
}

// sameDurable reports whether the consumer's settings are those
// EnsureDurable sets (the server fills in the rest).
func sameDurable(have, want jetstream.ConsumerConfig) bool {
	return have.Durable == want.Durable && have.Description == want.Description &&
		have.FilterSubject == want.FilterSubject && have.DeliverPolicy == want.DeliverPolicy &&
		have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait &&
		have.MaxDeliver == want.MaxDeliver && have.MaxAckPending == want.MaxAckPending &&
		have.Replicas == want.Replicas
}
