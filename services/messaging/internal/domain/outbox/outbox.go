// Package outbox is the transactional outbox of customer events: an event is
// stored in the same transaction as the message it describes, and a relay
// publishes it afterwards, so a crash or a NATS outage between commit and
// publish loses nothing (ARCHITECTURE.md §3).
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
	// locked so that other relays skip them, and hands them to publish one
	// at a time. Events publish accepted are marked published; the first
	// error stops the batch, leaves the rest for later and is returned with
	// the number published before it.
	PublishPending(ctx context.Context, limit int, publish func(context.Context, Event) error) (int, error)
	// Prune deletes events published before cutoff.
	Prune(ctx context.Context, cutoff time.Time) (int64, error)
	// Backlog counts unpublished events.
	Backlog(ctx context.Context) (int64, error)
}

// Publisher delivers an event to the event stream and returns once the
// stream has acknowledged it.
type Publisher interface {
	Publish(ctx context.Context, e Event) error
}
