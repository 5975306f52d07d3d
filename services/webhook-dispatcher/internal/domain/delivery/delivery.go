// Package delivery is one event sent (or not) to a workspace's webhook: the
// exact body, every attempt, and the outcome the delivery log shows
// (docs/webhooks.md "Retries", "The delivery log"). It also holds the
// ports to the receiver and to storage; the signature is the Go client's
// (sdk/go/webhook.Sign).
package delivery

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	sdkwebhook "github.com/parleyhq/parley/sdk/go/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// Status is where a delivery stands.
type Status string

// Delivery states: pending while attempts are under way; delivered after a
// 2xx; failed when every attempt failed; skipped when the event arrived
// while the webhook was paused (recorded, not sent).
const (
	StatusPending   Status = "pending"
	StatusDelivered Status = "delivered"
	StatusFailed    Status = "failed"
	StatusSkipped   Status = "skipped"
)

// Statuses lists every status, for validating filters.
var Statuses = []Status{StatusPending, StatusDelivered, StatusFailed, StatusSkipped}

// Final reports whether the delivery has its outcome.
func (s Status) Final() bool { return s != StatusPending }

// Event kinds the dispatcher sends: the kinds the Go client's webhook
// package decodes.
const (
	EventMessageReceived  = string(sdkwebhook.KindMessageReceived)
	EventPostbackReceived = string(sdkwebhook.KindPostbackReceived)
	EventCommentReceived  = string(sdkwebhook.KindCommentReceived)
	EventTest             = string(sdkwebhook.KindTest)
)

// Events lists every event kind, for validating filters.
var Events = []string{EventMessageReceived, EventPostbackReceived, EventCommentReceived, EventTest}

// ErrMalformedEvent marks an event that can never be delivered (it does not
// decode, or lacks what the envelope needs); consumers drop it.
var ErrMalformedEvent = errors.New("malformed event")

// ErrNotFound means the workspace's log has no delivery with that id.
var ErrNotFound = errors.New("delivery not found")

// SkippedPaused is last_error of a delivery skipped because the webhook was
// paused.
const SkippedPaused = "webhook paused; not sent"

// Attempt is one POST to the receiver.
type Attempt struct {
	Number    int
	StartedAt time.Time
	Duration  time.Duration
	// ResponseStatus is the receiver's HTTP status, 0 when it gave none.
	ResponseStatus int
	// Error says why the attempt failed; empty on success.
	Error string
}

// DurationMS is the attempt's duration in milliseconds to the microsecond,
// as the log stores and shows it.
func (a Attempt) DurationMS() float64 {
	return math.Round(float64(a.Duration)/float64(time.Microsecond)) / 1000
}

// OptionalStatus is ResponseStatus for a field that is null when the
// receiver gave no answer.
func (a Attempt) OptionalStatus() *int {
	if a.ResponseStatus == 0 {
		return nil
	}
	s := a.ResponseStatus
	return &s
}

// OptionalError is Error for a field that is null when the attempt
// succeeded.
func (a Attempt) OptionalError() *string {
	if a.Error == "" {
		return nil
	}
	e := a.Error
	return &e
}

// Succeeded reports whether the receiver accepted the event (any 2xx).
func (a Attempt) Succeeded() bool {
	return a.Error == "" && a.ResponseStatus >= 200 && a.ResponseStatus <= 299
}

// Delivery is one event for one workspace. Its id is the event id, the
// envelope id and X-Service-Delivery.
type Delivery struct {
	ID          string
	WorkspaceID string
	Event       string
	// Payload is the serialized envelope, sent byte for byte on every
	// attempt.
	Payload        []byte
	Status         Status
	Attempts       int
	ResponseStatus *int
	LastError      *string
	DeliveredAt    *time.Time
	CreatedAt      time.Time
	// History holds every attempt, oldest first.
	History []Attempt
}

// New returns a pending delivery of payload.
func New(id, workspaceID, event string, payload []byte, now time.Time) *Delivery {
	return &Delivery{ID: id, WorkspaceID: workspaceID, Event: event, Payload: payload, Status: StatusPending, CreatedAt: now}
}

// NewSkipped returns the record of an event that arrived while the webhook
// was paused.
func NewSkipped(id, workspaceID, event string, payload []byte, now time.Time) *Delivery {
	d := New(id, workspaceID, event, payload, now)
	d.Skip()
	return d
}

// Skip marks the delivery as not sent because the webhook is paused.
func (d *Delivery) Skip() {
	d.Status = StatusSkipped
	msg := SkippedPaused
	d.LastError = &msg
}

// NextAttempt is the number the next attempt carries.
func (d *Delivery) NextAttempt() int { return d.Attempts + 1 }

// Record adds an attempt: the delivery shows its status and error until
// the next one.
func (d *Delivery) Record(a Attempt) {
	d.History = append(d.History, a)
	d.Attempts = a.Number
	d.ResponseStatus = nil
	if a.ResponseStatus != 0 {
		s := a.ResponseStatus
		d.ResponseStatus = &s
	}
	d.LastError = nil
	if a.Error != "" {
		e := a.Error
		d.LastError = &e
	}
	if a.Succeeded() {
		// At the precision PostgreSQL keeps, as the app's clock is: the
		// duration adds nanoseconds, and the answer of POST /v1/webhook/test
		// would show a delivered_at the delivery log never does.
		at := a.StartedAt.Add(a.Duration).Truncate(time.Microsecond)
		d.DeliveredAt = &at
	}
}

// Finish sets the outcome from the last attempt: delivered after a 2xx,
// failed otherwise. A delivery already delivered stays delivered: a round
// starts pending, so it is one that another round delivered while this
// one was under way (Continue).
func (d *Delivery) Finish() {
	if d.Status == StatusDelivered {
		return
	}
	if n := len(d.History); n > 0 && d.History[n-1].Succeeded() {
		d.Status = StatusDelivered
		return
	}
	d.Status = StatusFailed
	d.DeliveredAt = nil
}

// Continue carries d on from stored, the record another round of the same
// delivery wrote while d's round was under way (a replay, live delivery,
// or a second copy of the event in the stream). own are the attempts of
// d's round that the log does not hold. d takes stored's body, creation
// time and attempts, and own join them, oldest first and renumbered, so
// the log counts the attempts of both rounds; response_status and
// last_error are the latest attempt's. The status is d's, except that a
// delivery either round delivered is delivered, and a skip leaves an
// outcome stored meanwhile as it is.
func (d *Delivery) Continue(stored *Delivery, own []Attempt) {
	status := d.Status
	history := append(slices.Clone(stored.History), own...)
	slices.SortStableFunc(history, func(a, b Attempt) int { return a.StartedAt.Compare(b.StartedAt) })
	d.Payload, d.CreatedAt = stored.Payload, stored.CreatedAt
	d.History, d.ResponseStatus, d.LastError, d.DeliveredAt = nil, nil, nil, nil
	d.Attempts = stored.Attempts - len(stored.History)
	for _, a := range history {
		a.Number = d.NextAttempt()
		d.Record(a)
	}
	switch {
	case status == StatusSkipped && stored.Status.Final():
		d.Status, d.ResponseStatus, d.LastError, d.DeliveredAt = stored.Status, stored.ResponseStatus, stored.LastError, stored.DeliveredAt
	case status == StatusSkipped:
		d.Skip()
	case status == StatusDelivered || stored.Status == StatusDelivered:
		d.Status = StatusDelivered
	case status == StatusFailed:
		d.Status, d.DeliveredAt = StatusFailed, nil
	default:
		d.Status = StatusPending
	}
}

// Request is one signed POST of a delivery.
type Request struct {
	URL        string
	Secret     string
	Event      string
	DeliveryID string
	Body       []byte
}

// Result is what came back from one POST.
type Result struct {
	// Status is the HTTP status, 0 when there was no response.
	Status int
	// Error says why the attempt failed; empty for a 2xx.
	Error string
}

// Sender posts deliveries to receivers. It signs each request afresh with
// the current time; the caller bounds it with ctx.
type Sender interface {
	Send(ctx context.Context, r Request) Result
}

// ListQuery selects part of a workspace's log, newest first (created_at,
// then id, descending): the rows paging.Paginate fetches.
type ListQuery struct {
	Limit int
	// Status and Event filter when set.
	Status Status
	Event  string
	// Before, when set, keeps deliveries created strictly before it.
	Before *time.Time
	// At, when set, selects every delivery created at exactly this time,
	// and Before and Limit are ignored: a tie group is read whole.
	At *time.Time
	// Since, when set, keeps deliveries created at or after it: the log's
	// retention, which the purge only catches up with now and then.
	Since *time.Time
}

// Store keeps the delivery log.
type Store interface {
	// Create stores d unless a delivery with its id exists, and returns
	// the stored delivery and whether it was created now. A redelivered
	// event so finds its earlier row and body instead of adding one.
	Create(ctx context.Context, d *Delivery) (stored *Delivery, created bool, err error)
	// Insert stores d as a new row: its outcome (counted as Finish counts
	// it) or, still pending, its attempts so far. When a delivery with d's
	// id is stored already, nothing is written or counted and Insert
	// returns that delivery. It is the one write of a delivery settled in
	// its first round without a wait.
	Insert(ctx context.Context, d *Delivery, count func(*webhook.Webhook) (changed bool)) (existing *Delivery, err error)
	// Progress stores d's attempts so far while it is still pending, on
	// its stored row, if that row still counts read attempts: the count
	// d's round last read or wrote. Otherwise another round of the
	// delivery wrote it meanwhile: nothing is written, and Progress
	// returns the stored delivery (lost) for the round to carry on from
	// (Delivery.Continue) and write again. Each write of attempts adds
	// to the count, so it tells whether the row is still as read.
	Progress(ctx context.Context, d *Delivery, read int) (lost *Delivery, err error)
	// Finish stores d's outcome, on the condition Progress writes on
	// (returning the stored delivery when another round wrote first,
	// without counting), and, in the same transaction, passes the
	// workspace's webhook to count (when count is not nil and the webhook
	// still exists) and stores what count changed, so the log and the
	// failure counter never disagree. count may be called more than once
	// (on a fresh read of the webhook each time); what its last call
	// changed is stored.
	//
	// The four writes are safe for concurrent use, and concurrent calls
	// may share a statement or a transaction. None of them ever changes a
	// stored payload.
	Finish(ctx context.Context, d *Delivery, read int, count func(*webhook.Webhook) (changed bool)) (lost *Delivery, err error)
	// List returns the deliveries of the workspace's log that q selects,
	// newest first.
	List(ctx context.Context, workspaceID string, q ListQuery) ([]*Delivery, error)
	// Get returns the workspace's delivery with that id, with its
	// history, or ErrNotFound (also for another workspace's delivery).
	Get(ctx context.Context, workspaceID, id string) (*Delivery, error)
	// Purge deletes up to limit deliveries created before cutoff and says
	// how many went.
	Purge(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}
