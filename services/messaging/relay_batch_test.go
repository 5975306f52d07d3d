package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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

// TestSweepDeletesTheAcceptedPrefix: the sweep takes only rows older than
// its cutoff, oldest first; the rows publish accepted are deleted, the rest
// stay for the next sweep, in order.
func TestSweepDeletesTheAcceptedPrefix(t *testing.T) {
	t.Parallel()
	// The store alone, over its own database: no relay takes the rows.
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	now := time.Now()
	insert := func(age time.Duration) string {
		id := uuid.NewString()
		if err := gdb.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload, created_at) VALUES (?, ?, ?, ?)`,
			id, env.Stream.Subject(uuid.NewString(), "message.received"), []byte("e"), now.Add(-age)).Error; err != nil {
			t.Fatal(err)
		}
		return id
	}
	old := []string{insert(time.Minute), insert(time.Minute), insert(time.Minute)}
	young := insert(0)
	rows := func() (n int64) {
		if err := gdb.Raw(`SELECT count(*) FROM messaging.outbox`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	store := adapters.NewOutboxStore(gdb)
	cutoff := now.Add(-10 * time.Second)
	var seen [][]string
	refused := errors.New("stream refused the second")
	n, err := store.Sweep(context.Background(), cutoff, 10, func(_ context.Context, events []outbox.Event) (int, error) {
		ids := make([]string, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		seen = append(seen, ids)
		return 1, refused
	})
	if n != 1 || !errors.Is(err, refused) || len(seen) != 1 || !slices.Equal(seen[0], old) {
		t.Fatalf("Sweep = %d, %v after batches %v; want 1 of the 3 old rows %v, and the error", n, err, seen, old)
	}
	if n := rows(); n != 3 {
		t.Fatalf("%d rows left, want the 2 after the accepted one and the young one", n)
	}
	n, err = store.Sweep(context.Background(), cutoff, 10, func(_ context.Context, events []outbox.Event) (int, error) {
		if len(events) != 2 || events[0].ID != old[1] || events[1].ID != old[2] {
			t.Errorf("the next sweep got %v, want %v in order", events, old[1:])
		}
		return len(events), nil
	})
	if n != 2 || err != nil || rows() != 1 {
		t.Fatalf("second sweep = %d, %v, %d rows left", n, err, rows())
	}
	// The young row is Publish's to publish and Forget's to delete.
	if err := store.Forget(context.Background(), []string{young, old[0]}); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d rows left after Forget", n)
	}
}

// TestOneSweepAtATime: while one sweep (of any instance) is publishing,
// another returns at once without reading a row, so no two sweeps publish
// the same rows and none locks rows to tell.
func TestOneSweepAtATime(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	if err := gdb.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload, created_at) VALUES (?, ?, ?, now() - interval '1 minute')`,
		uuid.NewString(), env.Stream.Subject(uuid.NewString(), "message.received"), []byte("e")).Error; err != nil {
		t.Fatal(err)
	}
	// Two instances' stores: each sweep takes a connection of its own.
	first, second := adapters.NewOutboxStore(gdb), adapters.NewOutboxStore(gdb)
	ctx := context.Background()
	n, err := first.Sweep(ctx, time.Now(), 10, func(context.Context, []outbox.Event) (int, error) {
		n, err := second.Sweep(ctx, time.Now(), 10, func(_ context.Context, events []outbox.Event) (int, error) {
			t.Errorf("a second sweep got %d events while the first held its turn", len(events))
			return len(events), nil
		})
		if n != 0 || err != nil {
			t.Errorf("the second sweep = %d, %v; want 0, nil", n, err)
		}
		return 1, nil
	})
	if n != 1 || err != nil {
		t.Fatalf("the first sweep = %d, %v", n, err)
	}
	// Its turn ends with its transaction.
	if n, err := second.Sweep(ctx, time.Now(), 10, func(context.Context, []outbox.Event) (int, error) { return 0, nil }); n != 0 || err != nil {
		t.Fatalf("a later sweep = %d, %v", n, err)
	}
}
