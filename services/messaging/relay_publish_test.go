package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// relayBench is a relay over its own database and stream, run by the test
// alone: no messaging instance publishes or sweeps beside it.
type relayBench struct {
	env *testenv.Env
	db  *gorm.DB
	js  jetstream.JetStream
}

func newRelayBench(t *testing.T) *relayBench {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	rb := &relayBench{env: env, db: env.DB(t, adapters.Schema, migrations.FS), js: env.JetStream(t)}
	if _, err := env.Stream.Ensure(context.Background(), rb.js); err != nil {
		t.Fatal(err)
	}
	return rb
}

// commit writes events to the outbox as a receive transaction does, and
// returns them.
func (rb *relayBench) commit(t *testing.T, subject string, n int) []outbox.Event {
	t.Helper()
	events := make([]outbox.Event, n)
	for i := range events {
		events[i] = outbox.Event{ID: uuid.NewString(), Subject: subject, Payload: []byte("e"), CreatedAt: time.Now()}
		if err := rb.db.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload, created_at) VALUES (?, ?, ?, ?)`,
			events[i].ID, events[i].Subject, events[i].Payload, events[i].CreatedAt).Error; err != nil {
			t.Fatal(err)
		}
	}
	return events
}

func (rb *relayBench) rows(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := rb.db.Raw(`SELECT count(*) FROM messaging.outbox`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// run runs a relay with d's settings over the bench until the returned
// stop is called, which waits for Run to return.
func (rb *relayBench) run(t *testing.T, d app.RelayDeps) (*app.Relay, func()) {
	t.Helper()
	d.Store = adapters.NewOutboxStore(rb.db)
	d.Publisher = adapters.NewJetStreamPublisher(rb.js, rb.env.Stream)
	relay := app.NewRelay(d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	var once bool
	stop := func() {
		if !once {
			once = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return relay, stop
}

// countingObserver counts the relay's failures and recoveries, and takes
// the rest of what the relay tells (it tells nothing else).
type countingObserver struct {
	app.Observer
	failed, recovered atomic.Int64
}

func (o *countingObserver) OutboxPublished(int)            {}
func (o *countingObserver) OutboxPassFailed()              { o.failed.Add(1) }
func (o *countingObserver) OutboxFailing(error)            {}
func (o *countingObserver) OutboxRecovered()               { o.recovered.Add(1) }
func (o *countingObserver) OutboxBacklog(int64)            {}
func (o *countingObserver) TablePruned(string, int64)      {}
func (o *countingObserver) TablePruneFailed(string, error) {}

// TestRelayPublishesWhatACommitHandsIt: events handed over after their
// commit are in the stream, in order, and their rows gone, long before the
// sweep would take them; nothing is left for it.
func TestRelayPublishesWhatACommitHandsIt(t *testing.T) {
	t.Parallel()
	rb := newRelayBench(t)
	relay, _ := rb.run(t, app.RelayDeps{SweepAge: time.Hour, Poll: 20 * time.Millisecond})
	subject := rb.env.Stream.Subject(uuid.NewString(), "message.received")
	var want []string
	for range 20 {
		events := rb.commit(t, subject, 3)
		relay.Publish(events)
		for _, e := range events {
			want = append(want, e.ID)
		}
	}
	wait.Until(t, 5*time.Second, "every row deleted", func() bool { return rb.rows(t) == 0 })
	msgs := streamMessages(t, rb.js, rb.env.Stream.Name)
	if len(msgs) != len(want) {
		t.Fatalf("stream holds %d events, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if got := m.Header.Get(jetstream.MsgIDHeader); got != want[i] {
			t.Fatalf("event %d in the stream is %s, want %s: events leave in the order they were handed over", i, got, want[i])
		}
	}
}

// TestRelayLeavesWhatItCannotPublishToTheSweep: an event the stream refuses
// keeps its row (the sweep's to retry) and the failure is counted; the
// events handed over after it are published as ever.
func TestRelayLeavesWhatItCannotPublishToTheSweep(t *testing.T) {
	t.Parallel()
	rb := newRelayBench(t)
	obs := &countingObserver{}
	relay, _ := rb.run(t, app.RelayDeps{SweepAge: time.Hour, Poll: 20 * time.Millisecond, Observer: obs})
	refused := rb.commit(t, "nowhere."+uuid.NewString(), 1)
	relay.Publish(refused)
	wait.Until(t, 5*time.Second, "the failed publish counted", func() bool { return obs.failed.Load() >= 1 })
	ok := rb.commit(t, rb.env.Stream.Subject(uuid.NewString(), "message.received"), 1)
	relay.Publish(ok)
	wait.Until(t, 5*time.Second, "the next event published and deleted", func() bool { return rb.rows(t) == 1 })
	var left string
	rb.db.Raw(`SELECT event_id::text FROM messaging.outbox`).Row().Scan(&left)
	if left != refused[0].ID {
		t.Fatalf("the row left is %s, want the refused event's %s", left, refused[0].ID)
	}
	if obs.recovered.Load() != 1 {
		t.Fatalf("recovered %d times after the failure, want 1", obs.recovered.Load())
	}
}

// TestRelayPublishesWhatItHoldsBeforeItStops: events handed over just
// before shutdown are published and their rows deleted before Run returns.
func TestRelayPublishesWhatItHoldsBeforeItStops(t *testing.T) {
	t.Parallel()
	rb := newRelayBench(t)
	relay, stop := rb.run(t, app.RelayDeps{SweepAge: time.Hour})
	relay.Publish(rb.commit(t, rb.env.Stream.Subject(uuid.NewString(), "message.received"), 50))
	stop()
	if n := rb.rows(t); n != 0 {
		t.Fatalf("%d rows left after the relay stopped", n)
	}
	if n := len(streamMessages(t, rb.js, rb.env.Stream.Name)); n != 50 {
		t.Fatalf("stream holds %d events, want 50", n)
	}
}

// TestRelayQueueIsBounded: past Queue events waiting, new ones are left in
// the outbox for the sweep rather than held in memory.
func TestRelayQueueIsBounded(t *testing.T) {
	t.Parallel()
	rb := newRelayBench(t)
	// Not run: nothing takes from the queue.
	relay := app.NewRelay(app.RelayDeps{
		Store: adapters.NewOutboxStore(rb.db), Publisher: adapters.NewJetStreamPublisher(rb.js, rb.env.Stream),
		SweepAge: time.Hour, Queue: 5,
	})
	subject := rb.env.Stream.Subject(uuid.NewString(), "message.received")
	relay.Publish(rb.commit(t, subject, 4))
	relay.Publish(rb.commit(t, subject, 2)) // past the bound: left to the sweep
	relay.Publish(rb.commit(t, subject, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	relay.Run(ctx) // publishes what it holds, and stops
	if n := rb.rows(t); n != 2 {
		t.Fatalf("%d rows left, want the 2 that found the queue full", n)
	}
}
