package main

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// TestPublishBatch: a batch is acknowledged as a whole when every event
// reaches the stream, in order; an event the stream refuses stops the
// count there, with the events after it not counted even if stored.
func TestPublishBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pub := adapters.NewJetStreamPublisher(h.env.JetStream(t), h.env.Stream)
	ws := uuid.NewString()
	event := func(subject string) outbox.Event {
		return outbox.Event{ID: uuid.NewString(), Subject: subject, Payload: []byte("e")}
	}
	ok := h.env.Stream.Subject(ws, "message.received")
	batch := []outbox.Event{event(ok), event(ok), event(ok)}
	if n, err := pub.PublishBatch(context.Background(), batch); n != 3 || err != nil {
		t.Fatalf("PublishBatch = %d, %v; want 3, nil", n, err)
	}
	// Again: the ids make the repeat harmless, and it is acknowledged.
	if n, err := pub.PublishBatch(context.Background(), batch); n != 3 || err != nil {
		t.Fatalf("PublishBatch again = %d, %v; want 3, nil", n, err)
	}
	// A subject outside the stream has no stream to acknowledge it.
	mixed := []outbox.Event{event(ok), event("nowhere." + uuid.NewString()), event(ok)}
	if n, err := pub.PublishBatch(context.Background(), mixed); n != 1 || err == nil {
		t.Fatalf("PublishBatch with a refused second event = %d, %v; want 1 and an error", n, err)
	}
}

// TestPublishPendingMarksTheAcceptedPrefix: the rows publish accepted are
// marked published, the rest stay pending for the next pass, in order.
func TestPublishPendingMarksTheAcceptedPrefix(t *testing.T) {
	t.Parallel()
	// The store alone, over its own database: no relay takes the rows.
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	for range 3 {
		if err := gdb.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload) VALUES (?, ?, ?)`,
			uuid.NewString(), env.Stream.Subject(uuid.NewString(), "message.received"), []byte("e")).Error; err != nil {
			t.Fatal(err)
		}
	}
	pending := func() (n int64) {
		if err := gdb.Raw(`SELECT count(*) FROM messaging.outbox WHERE published_at IS NULL`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	store := adapters.NewOutboxStore(gdb)
	var seen [][]string
	refused := errors.New("stream refused the second")
	n, err := store.PublishPending(context.Background(), 10, func(_ context.Context, events []outbox.Event) (int, error) {
		ids := make([]string, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		seen = append(seen, ids)
		return 1, refused
	})
	if n != 1 || !errors.Is(err, refused) || len(seen) != 1 || len(seen[0]) != 3 {
		t.Fatalf("PublishPending = %d, %v after batches %v; want 1 of a batch of 3, and the error", n, err, seen)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d rows pending, want the 2 after the accepted one", n)
	}
	n, err = store.PublishPending(context.Background(), 10, func(_ context.Context, events []outbox.Event) (int, error) {
		if len(events) != 2 || events[0].ID != seen[0][1] || events[1].ID != seen[0][2] {
			t.Errorf("the next pass got %v, want %v in order", events, seen[0][1:])
		}
		return len(events), nil
	})
	if n != 2 || err != nil || pending() != 0 {
		t.Fatalf("second pass = %d, %v", n, err)
	}
}
