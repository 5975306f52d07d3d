// Package outbox is the transactional outbox of customer events: an event is
// stored in the same transaction as the message it describes, published
// right after that commit, and its row deleted once the stream has it. A
// sweep publishes the rows a crash or an outage left behind, so nothing is
// lost between commit and publish (docs/architecture.md "Customer events:
// the outbox and the EVENTS stream").
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

// Store keeps the outbox rows: an event's row lives from the commit that
// wrote it until it is published.
type Store interface {
	// Forget deletes the rows of events the stream has acknowledged. An id
	// whose row is already gone is no error.
	Forget(ctx context.Context, ids []string) error
	// Sweep takes up to limit events written before cutoff, oldest first,
	// and hands them to publish together; the first n that publish
	// accepted are deleted, and publish's error is returned with n. One
	// sweep runs at a time across every instance: while another holds the
	// turn, Sweep returns 0 and nil at once.
	Sweep(ctx context.Context, cutoff time.Time, limit int, publish func(context.Context, []Event) (n int, err error)) (int, error)
	// Backlog counts the events not yet published (and those published
	// but not yet forgotten, a moment's worth).
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
