// Package outbox is the transactional outbox of customer events: an event is
// stored in the same transaction as the message it describes, and a relay
// publishes it afterwards, so a crash or a NATS outage between commit and
// publish loses nothing (docs/architecture.md "Customer events: the outbox
// and the EVENTS stream").
package outbox

import (
	"context"
	"time"
)

// Event is one stored event, ready to publish as is.
type Event struct {
	// ID is the event id; it is published as Nats-Msg-Id, so a repeated
	// publish of the same row is stored once by the stream.
	ID      string
	Subject string
	// Payload is the proto-marshalled parley.events.v1.Event.
	Payload   []byte
	CreatedAt time.Time
}

// Store keeps the outbox rows.
type Store interface {
	// PublishPending takes up to limit unpublished events, oldest first,
	// locked so that other relays skip them, and hands them to publish
	// together. The first n events publish accepted are marked published,
	// the rest are left for later, and publish's error is returned with n.
	PublishPending(ctx context.Context, limit int, publish func(context.Context, []Event) (n int, err error)) (int, error)
	// Prune deletes events published before cutoff.
	Prune(ctx context.Context, cutoff time.Time) (int64, error)
	// Backlog counts unpublished events.
	Backlog(ctx context.Context) (int64, error)
}

// Publisher delivers events to the event stream.
type Publisher interface {
	// PublishBatch sends events in their order without waiting between
	// them, then waits for the stream's acknowledgements. It returns how
	// many of the first events were acknowledged, every one before them
	// too, and the error that stopped the rest; an event after the first
	// failure may have been stored as well, and is published again later
	// (its id makes the repeat harmless).
	PublishBatch(ctx context.Context, events []Event) (n int, err error)
}
