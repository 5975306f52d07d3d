package app_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/isolation"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// countingStore is the delivery log, telling which of its calls the use
// cases made.
type countingStore struct {
	*adapters.DeliveryStore
	mu    sync.Mutex
	calls []string
}

func (s *countingStore) note(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

func (s *countingStore) made() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *countingStore) Create(ctx context.Context, d *delivery.Delivery) (*delivery.Delivery, bool, error) {
	s.note("Create")
	return s.DeliveryStore.Create(ctx, d)
}

func (s *countingStore) Insert(ctx context.Context, d *delivery.Delivery, count func(*webhook.Webhook) bool) (*delivery.Delivery, error) {
	s.note("Insert " + string(d.Status))
	return s.DeliveryStore.Insert(ctx, d, count)
}

func (s *countingStore) Progress(ctx context.Context, d *delivery.Delivery, read int) (*delivery.Delivery, error) {
	s.note("Progress")
	return s.DeliveryStore.Progress(ctx, d, read)
}

func (s *countingStore) Finish(ctx context.Context, d *delivery.Delivery, read int, count func(*webhook.Webhook) bool) (*delivery.Delivery, error) {
	s.note("Finish " + string(d.Status))
	return s.DeliveryStore.Finish(ctx, d, read, count)
}

// scriptedSender answers each POST with the next of its results, after
// its delay; the last result repeats.
type scriptedSender struct {
	delay   time.Duration
	results []delivery.Result
	mu      sync.Mutex
	sent    []delivery.Request
}

func (s *scriptedSender) Send(_ context.Context, r delivery.Request) delivery.Result {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, r)
	return s.results[min(len(s.sent), len(s.results))-1]
}

func (s *scriptedSender) requests() []delivery.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

type deliveryCase struct {
	app    *app.App
	store  *countingStore
	sender *scriptedSender
	ws     string
	// notSent gets the delivery id of every attempt an open circuit
	// refused.
	notSent chan string
	// replays are the replay use cases over the same stores; lastWritten
	// sets when a delivery's row was last written.
	replays     *app.Replays
	lastWritten func(id string, at time.Time)
}

// refusalObserver is the service's observer, also telling which attempts
// the circuit refused.
type refusalObserver struct {
	*observe.Observer
	notSent chan string
}

func (o refusalObserver) AttemptNotSent(d *delivery.Delivery, at delivery.Attempt) {
	o.Observer.AttemptNotSent(d, at)
	o.notSent <- d.ID
}

func newDeliveryCase(t *testing.T, pendingAfter time.Duration, sender *scriptedSender) deliveryCase {
	t.Helper()
	return newDeliveryCaseWith(t, app.Policy{
		RetryDelays: []time.Duration{10 * time.Millisecond}, AttemptTimeout: 5 * time.Second,
		PauseAfter: 20, PendingAfter: pendingAfter,
	}, sender)
}

// newDeliveryCaseWith is newDeliveryCase under policy.
func newDeliveryCaseWith(t *testing.T, policy app.Policy, sender *scriptedSender) deliveryCase {
	t.Helper()
	c := newDeliveryCaseSending(t, policy, sender)
	c.sender = sender
	return c
}

// newDeliveryCaseSending is newDeliveryCaseWith with any sender (the
// case's sender field is then nil).
func newDeliveryCaseSending(t *testing.T, policy app.Policy, sender delivery.Sender) deliveryCase {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	store := &countingStore{DeliveryStore: adapters.NewDeliveryStore(gdb)}
	webhooks := adapters.NewWebhookStore(gdb)
	notSent := make(chan string, 16)
	ws := uuid.NewString()
	if _, err := webhooks.Put(context.Background(), webhook.New(ws, "https://hooks.example.com/in", "whsec_test", time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Deps{
		Policy:     policy,
		Webhooks:   webhooks,
		Deliveries: store,
		Sender:     sender,
		Observer:   refusalObserver{Observer: observe.New(env.Logger(t), prometheus.NewRegistry()), notSent: notSent},
	})
	replays := app.NewReplays(app.ReplaysDeps{App: a, Deliveries: adapters.NewReplayStore(gdb)})
	lastWritten := func(id string, at time.Time) {
		t.Helper()
		if err := gdb.Exec(`UPDATE `+adapters.Schema+`.deliveries SET updated_at = ? WHERE id = ?`, at, id).Error; err != nil {
			t.Fatal(err)
		}
	}
	return deliveryCase{app: a, store: store, ws: ws, notSent: notSent, replays: replays, lastWritten: lastWritten}
}

func (c deliveryCase) event() *eventsv1.Event {
	now := timestamppb.Now()
	return &eventsv1.Event{
		Id: uuid.Must(uuid.NewV7()).String(), Type: delivery.EventMessageReceived, WorkspaceId: c.ws, CreatedAt: now,
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId: c.ws, ConversationId: uuid.NewString(), Platform: "telegram",
			Channel: &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact: &eventsv1.Contact{Id: uuid.NewString(), SenderId: "551234567", Name: "Bat-Erdene"},
			Message: &eventsv1.Message{Id: uuid.NewString(), Text: "Hi", Type: "text", ExternalId: "1042", CreatedAt: now},
		}},
	}
}

func (c deliveryCase) stored(t *testing.T, id string) *delivery.Delivery {
	t.Helper()
	d, err := c.store.Get(context.Background(), c.ws, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	answered200 = delivery.Result{Status: 200}
	answered500 = delivery.Result{Status: 500, Error: "receiver answered 500"}
)

// An event handed out for the first time and delivered at once costs the
// log one write, the outcome's insert: no read and no pending row first.
func TestFirstDeliveryIsWrittenOnceWithItsOutcome(t *testing.T) {
	t.Parallel()
	c := newDeliveryCase(t, time.Minute, &scriptedSender{results: []delivery.Result{answered200}})
	ev := c.event()
	if err := c.app.DeliverEvent(t.Context(), ev, false, nil); err != nil {
		t.Fatal(err)
	}
	if calls := c.store.made(); !slices.Equal(calls, []string{"Insert delivered"}) {
		t.Fatalf("log calls %v, want one insert of the outcome", calls)
	}
	d := c.stored(t, ev.GetId())
	if d.Status != delivery.StatusDelivered || d.Attempts != 1 || len(d.History) != 1 || d.DeliveredAt == nil {
		t.Fatalf("stored %+v", d)
	}
	if sent := c.sender.requests(); len(sent) != 1 || sent[0].DeliveryID != ev.GetId() || string(sent[0].Body) != string(d.Payload) {
		t.Fatalf("sent %d requests, or not the stored body", len(sent))
	}
}

// An attempt in flight longer than PendingAfter is shown pending while it
// lasts; its outcome then updates that row.
func TestALongAttemptIsShownPending(t *testing.T) {
	t.Parallel()
	c := newDeliveryCase(t, 50*time.Millisecond, &scriptedSender{delay: 600 * time.Millisecond, results: []delivery.Result{answered200}})
	ev := c.event()
	done := make(chan error, 1)
	go func() { done <- c.app.DeliverEvent(t.Context(), ev, false, nil) }()
	wait.For(t, 5*time.Second, "the pending row", func() error {
		d, err := c.store.Get(t.Context(), c.ws, ev.GetId())
		if err != nil {
			return err
		}
		if d.Status != delivery.StatusPending || d.Attempts != 0 {
			t.Fatalf("while the attempt is in flight: %+v", d)
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls := c.store.made(); !slices.Equal(calls, []string{"Insert pending", "Finish delivered"}) {
		t.Fatalf("log calls %v", calls)
	}
	if d := c.stored(t, ev.GetId()); d.Status != delivery.StatusDelivered || d.Attempts != 1 {
		t.Fatalf("stored %+v", d)
	}
}

// A failed attempt that will be retried is stored at once (the log shows
// the delivery's progress); the retry's outcome updates it.
func TestAFailureIsStoredBeforeTheRetry(t *testing.T) {
	t.Parallel()
	c := newDeliveryCase(t, time.Minute, &scriptedSender{results: []delivery.Result{answered500, answered200}})
	ev := c.event()
	if err := c.app.DeliverEvent(t.Context(), ev, false, nil); err != nil {
		t.Fatal(err)
	}
	if calls := c.store.made(); !slices.Equal(calls, []string{"Insert pending", "Finish delivered"}) {
		t.Fatalf("log calls %v", calls)
	}
	d := c.stored(t, ev.GetId())
	if d.Status != delivery.StatusDelivered || d.Attempts != 2 || d.History[0].ResponseStatus != 500 || d.History[1].Number != 2 {
		t.Fatalf("stored %+v", d)
	}
}

// A redelivered event is read first: settled, it is not sent again; not
// stored (its first round died between the POST and the write), it is sent
// again under the same id, as at-least-once allows.
func TestARedeliveryReadsTheLogFirst(t *testing.T) {
	t.Parallel()
	c := newDeliveryCase(t, time.Minute, &scriptedSender{results: []delivery.Result{answered200}})
	settled := c.event()
	if err := c.app.DeliverEvent(t.Context(), settled, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.app.DeliverEvent(t.Context(), settled, true, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(c.sender.requests()); n != 1 {
		t.Fatalf("a settled delivery redelivered was sent again (%d requests)", n)
	}

	lost := c.event() // as if the first round's process died after its POST
	if err := c.app.DeliverEvent(t.Context(), lost, true, nil); err != nil {
		t.Fatal(err)
	}
	sent := c.sender.requests()
	if len(sent) != 2 || sent[1].DeliveryID != lost.GetId() {
		t.Fatalf("sent %d requests", len(sent))
	}
	if d := c.stored(t, lost.GetId()); d.Status != delivery.StatusDelivered || d.Attempts != 1 {
		t.Fatalf("stored %+v", d)
	}
}

// An event handed out for the first time whose delivery another round
// recorded already (a replay that reached it first, a second copy of the
// event in the stream) is sent, and its attempts are added to that record,
// numbered after its own, with the stored body kept.
func TestAFirstDeliveryCarriesOnAnotherRoundsRecord(t *testing.T) {
	t.Parallel()
	c := newDeliveryCase(t, time.Minute, &scriptedSender{results: []delivery.Result{answered200}})
	ev := c.event()
	earlier := delivery.New(ev.GetId(), c.ws, ev.GetType(), []byte(`{"first":true}`), time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond))
	earlier.Record(delivery.Attempt{Number: 1, StartedAt: earlier.CreatedAt, Duration: time.Millisecond, ResponseStatus: 503, Error: "receiver answered 503"})
	earlier.Finish()
	if _, err := c.store.DeliveryStore.Insert(t.Context(), earlier, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.app.DeliverEvent(t.Context(), ev, false, nil); err != nil {
		t.Fatal(err)
	}
	d := c.stored(t, ev.GetId())
	if d.Status != delivery.StatusDelivered || d.Attempts != 2 || len(d.History) != 2 || d.History[1].Number != 2 ||
		d.History[1].ResponseStatus != 200 || string(d.Payload) != `{"first":true}` || !d.CreatedAt.Equal(earlier.CreatedAt) {
		t.Fatalf("stored %+v", d)
	}
}

// Attempts an open circuit refuses are not written one by one: they are
// stored with the round's next write. A delivery whose every attempt is
// refused is written twice, pending after Policy.PendingAfter and then
// with its outcome holding all four attempts, not once per attempt; the
// one that opened the circuit (its first attempt sent, no answer) writes
// that attempt and then its outcome.
func TestAttemptsTheCircuitRefusesAreStoredWithTheNextWrite(t *testing.T) {
	t.Parallel()
	sender := &scriptedSender{results: []delivery.Result{{Error: "dial tcp 192.0.2.1:443: connect: connection refused"}}}
	c := newDeliveryCaseWith(t, app.Policy{
		RetryDelays:    []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		AttemptTimeout: 5 * time.Second, PauseAfter: 20, PendingAfter: 100 * time.Millisecond,
		Circuit: isolation.Policy{After: 1, CoolDown: time.Hour},
	}, sender)

	opener := c.event()
	if err := c.app.DeliverEvent(t.Context(), opener, false, nil); err != nil {
		t.Fatal(err)
	}
	if calls := c.store.made(); !slices.Equal(calls, []string{"Insert pending", "Finish failed"}) {
		t.Fatalf("log calls of the delivery that opened the circuit: %v, want its sent attempt and then its outcome", calls)
	}
	refused := c.event()
	if err := c.app.DeliverEvent(t.Context(), refused, false, nil); err != nil {
		t.Fatal(err)
	}
	if calls := c.store.made()[2:]; !slices.Equal(calls, []string{"Insert pending", "Finish failed"}) {
		t.Fatalf("log calls of a delivery the circuit refused: %v, want pending once and then the outcome", calls)
	}
	if n := len(sender.requests()); n != 1 {
		t.Fatalf("%d requests sent, want only the first delivery's first attempt", n)
	}
	for _, ev := range []*eventsv1.Event{opener, refused} {
		d := c.stored(t, ev.GetId())
		if d.Status != delivery.StatusFailed || d.Attempts != 4 || len(d.History) != 4 {
			t.Fatalf("stored %+v, want failed after 4 attempts", d)
		}
		for i, at := range d.History {
			notSent := ev != opener || i > 0
			if at.Number != i+1 || at.ResponseStatus != 0 || strings.HasPrefix(at.Error, "not sent: ") != notSent {
				t.Fatalf("delivery %s attempt %d: %+v", d.ID, i+1, at)
			}
		}
	}
}

// A round that stops (shutdown) after attempts the circuit refused stores
// them before it hands its event back, so the redelivery's round
// continues their numbering.
func TestRefusedAttemptsAreStoredWhenTheRoundStops(t *testing.T) {
	t.Parallel()
	sender := &scriptedSender{results: []delivery.Result{{Error: "dial tcp 192.0.2.1:443: connect: connection refused"}}}
	c := newDeliveryCaseWith(t, app.Policy{
		RetryDelays:    []time.Duration{time.Hour},
		AttemptTimeout: 5 * time.Second, PauseAfter: 20, PendingAfter: time.Hour,
		Circuit: isolation.Policy{After: 1, CoolDown: time.Hour},
	}, sender)
	// The first delivery's attempt gets no answer and opens the circuit;
	// that round then stops too.
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.app.DeliverEvent(ctx, c.event(), false, nil) }()
	wait.For(t, 5*time.Second, "the first attempt", func() error {
		if len(sender.requests()) == 0 {
			return errors.New("not sent yet")
		}
		return nil
	})
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("DeliverEvent = %v, want context.Canceled", err)
	}

	ev := c.event()
	ctx, stop = context.WithCancel(t.Context())
	go func() { done <- c.app.DeliverEvent(ctx, ev, false, nil) }()
	for id := range c.notSent {
		if id == ev.GetId() {
			break // its first attempt, refused; the round waits an hour for the next
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("DeliverEvent = %v, want context.Canceled", err)
	}
	d := c.stored(t, ev.GetId())
	if d.Status != delivery.StatusPending || d.Attempts != 1 || !strings.HasPrefix(d.History[0].Error, "not sent: ") {
		t.Fatalf("stored %+v, want pending with the refused attempt", d)
	}
}

// A round whose attempts the circuit refuses writes nothing between its
// pending row and its outcome, every delay long: a replay of the delivery
// meanwhile finds it under way (replay.ErrBusy) and sends nothing, rather
// than taking it for abandoned and sending it beside the live round.
func TestAReplayWaitsOutARoundOfRefusedAttempts(t *testing.T) {
	t.Parallel()
	c := newDeliveryCaseWith(t, app.Policy{
		RetryDelays:    []time.Duration{time.Minute, time.Minute, time.Minute},
		AttemptTimeout: 5 * time.Second, PauseAfter: 20,
	}, &scriptedSender{results: []delivery.Result{answered200}})
	ev := c.event()
	pending := delivery.New(ev.GetId(), c.ws, ev.GetType(), []byte(`{}`), time.Now().UTC().Truncate(time.Microsecond))
	if _, err := c.store.DeliveryStore.Insert(t.Context(), pending, nil); err != nil {
		t.Fatal(err)
	}
	// As a live round's row after two refused attempts and most of the
	// third delay: written 2.5 minutes ago.
	c.lastWritten(ev.GetId(), time.Now().Add(-150*time.Second))
	if err := c.replays.ReplayEvent(t.Context(), ev, nil); !errors.Is(err, replay.ErrBusy) {
		t.Fatalf("ReplayEvent = %v, want replay.ErrBusy", err)
	}
	if n := len(c.sender.requests()); n != 0 {
		t.Fatalf("the replay sent %d requests beside the live round", n)
	}
	// Not written for longer than every delay, an attempt and the margin:
	// abandoned, taken over.
	c.lastWritten(ev.GetId(), time.Now().Add(-time.Hour))
	if err := c.replays.ReplayEvent(t.Context(), ev, nil); err != nil {
		t.Fatal(err)
	}
	if d := c.stored(t, ev.GetId()); d.Status != delivery.StatusDelivered || len(c.sender.requests()) != 1 {
		t.Fatalf("after the takeover: %+v", d)
	}
}
