// Package replay is an SRE's replay of a workspace's customer events
// (docs/operations.md "Replaying deliveries"): the events the EVENTS
// stream stored in a time range, optionally of one kind, are sent again to
// the workspace's webhook under their original delivery ids, and the new
// attempts are added to the delivery log.
//
// A replay is done in two steps so that neither is bound by one request's
// timeout: the events are read from the stream and queued, one replay
// request each, on a durable work queue (Source, Queue); every dispatcher
// instance then delivers the queued requests with the full retry schedule
// and records them (Deliveries). This package holds the rules of both steps
// and the ports they need.
package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Events are the kinds a replay can select: the customer events the
// stream carries (test events are not on it).
var Events = []string{delivery.EventMessageReceived, delivery.EventPostbackReceived, delivery.EventCommentReceived}

// ErrWebhookPaused refuses a replay to a paused webhook: it would only be
// recorded as skipped again. Saving the webhook again comes first.
var ErrWebhookPaused = errors.New("the webhook is paused; save it again (parleyctl webhook resave) before replaying")

// ErrTestEventNotReplayable refuses the replay of a test event's delivery:
// test events are sent straight to the webhook, never stored in the
// stream.
var ErrTestEventNotReplayable = errors.New("test events are never stored in the event stream, so they cannot be replayed: send a new test event instead")

// ErrEventNotInStream means a delivery's event is no longer in the stream:
// the stream keeps events for a limited time, and that has passed.
var ErrEventNotInStream = errors.New("the event is no longer in the event stream (its retention has passed), so it cannot be replayed")

// ErrBusy means another round of the same delivery is under way (the live
// consumer or another replay); the replay request is tried again later.
var ErrBusy = errors.New("delivery under way elsewhere")

// FieldError is a request field with a wrong value.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Reason }

// Request selects the events to replay: those of the workspace stored in
// the stream at or after Since and, when Until is set, before Until; of
// kind Event when it is set.
type Request struct {
	WorkspaceID string
	Since       time.Time
	Until       *time.Time
	Event       string
}

// Validate checks the request's own rules (the workspace id's form is the
// port's concern).
func (r Request) Validate() error {
	if r.Since.IsZero() {
		return &FieldError{Field: "since", Reason: "is required"}
	}
	if r.Until != nil && !r.Until.After(r.Since) {
		return &FieldError{Field: "until", Reason: "must be after since"}
	}
	if r.Event != "" && !slices.Contains(Events, r.Event) {
		return &FieldError{Field: "event", Reason: "must be one of " + strings.Join(Events, ", ")}
	}
	return nil
}

// Cursor continues a replay whose events did not all fit in one call: the
// same replay, from stream sequence From up to End (the stream's last
// sequence when the replay started).
type Cursor struct {
	ReplayID string
	From     uint64
	End      uint64
}

// Replay is what one call queued.
type Replay struct {
	ID string
	Request
	// DeliveryID is the one delivery whose event was queued, when the
	// replay was of one delivery (DeliveryScan); empty for a range.
	DeliveryID string
	// Queued counts the replay requests this call queued.
	Queued int
	// Next, when set, continues the replay; nil once every selected event
	// is queued.
	Next *Cursor
}

// Scan is what a Source reads: the request's bounds plus the stream
// sequences [From, End] (From 0: from Since).
type Scan struct {
	Request
	From uint64
	End  uint64
}

// WindowMargin widens the stream window of one delivery's event on each
// side, for the clocks of the service that made the event, the stream and
// the dispatcher, which may differ a little.
const WindowMargin = time.Minute

// DeliveryScan is where the event of the delivery d lies in the stream: of
// d's workspace and kind, stored between the event's making (its
// envelope's created_at, madeAt) and d's first recording (its created_at),
// WindowMargin wider on each side. Other events of the kind share the
// window; the replay takes only the one with d's id (Event.Is). End is
// left for the caller, who reads the stream's last sequence only once the
// replay is allowed. A test event's delivery is ErrTestEventNotReplayable.
func DeliveryScan(d *delivery.Delivery, madeAt time.Time) (Scan, error) {
	if !slices.Contains(Events, d.Event) {
		return Scan{}, ErrTestEventNotReplayable
	}
	from, to := madeAt, d.CreatedAt
	if to.Before(from) {
		from, to = to, from
	}
	until := to.Add(WindowMargin)
	return Scan{
		Request: Request{WorkspaceID: d.WorkspaceID, Since: from.Add(-WindowMargin), Until: &until, Event: d.Event},
	}, nil
}

// Event is one stored customer event as the stream holds it.
type Event struct {
	// Seq is the event's stream sequence.
	Seq uint64
	// ID is the event id (the delivery id).
	ID string
	// Type is the event kind, from the subject.
	Type string
	// StoredAt is when the stream stored it.
	StoredAt time.Time
	// Data is the serialized event, unchanged.
	Data []byte
}

// Is reports whether ev is the event of the delivery with that id (ids
// compared as UUIDs, in any case).
func (ev Event) Is(deliveryID string) bool { return strings.EqualFold(ev.ID, deliveryID) }

// Source reads customer events back from the stream.
type Source interface {
	// LastSeq is the stream's last sequence now: a replay never reads
	// past what existed when it started.
	LastSeq(ctx context.Context) (uint64, error)
	// Events yields the events s selects, in stream order, and ends at
	// s.End or at the first event stored at or after s.Until.
	Events(ctx context.Context, s Scan) iter.Seq2[Event, error]
}

// Queue holds replay requests until a dispatcher delivers them.
type Queue interface {
	// Put queues one replay request per event, durably, before it
	// returns. Putting the same event for the same replay twice queues it
	// once.
	Put(ctx context.Context, replayID, workspaceID string, events []Event) error
}

// Deliveries is what a replay needs of the delivery log beyond
// delivery.Store.
type Deliveries interface {
	// Claim makes d's delivery pending for a replay round and returns the
	// stored delivery (with the body first sent, and its history) or d
	// itself when none was stored. It returns ErrBusy when the stored
	// delivery is pending and was updated within busyFor (another round is
	// under way), and an error wrapping delivery.ErrMalformedEvent when
	// the id names a delivery of another workspace.
	Claim(ctx context.Context, d *delivery.Delivery, busyFor time.Duration) (*delivery.Delivery, error)
	// CreateSkipped records d as skipped unless its id is stored already.
	CreateSkipped(ctx context.Context, d *delivery.Delivery) error
}

// ForeignError says a replayed event's id names another workspace's
// delivery.
func ForeignError(id string) error {
	return fmt.Errorf("%w: id %s already names a delivery of another workspace", delivery.ErrMalformedEvent, id)
}
