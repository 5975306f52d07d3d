package adapters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// Claim decides, in one statement, whether a replay may take a delivery:
// a missing one is created, a settled one (or one abandoned mid-round) is
// made pending with its body and history kept, one under way is busy, and
// another workspace's is refused.
func TestReplayClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	store, deliveries := adapters.NewReplayStore(gdb), adapters.NewDeliveryStore(gdb)
	ws := uuid.NewString()
	now := time.Now().UTC().Truncate(time.Microsecond)

	// Never recorded: inserted pending with the body rendered now.
	fresh := delivery.New(uuid.NewString(), ws, delivery.EventMessageReceived, []byte(`{"new":1}`), now)
	got, err := store.Claim(ctx, fresh, time.Minute)
	if err != nil || got.Status != delivery.StatusPending || string(got.Payload) != `{"new":1}` || got.Attempts != 0 || len(got.History) != 0 {
		t.Fatalf("Claim(missing) = %+v, %v", got, err)
	}
	// Now pending and just written: busy.
	if _, err := store.Claim(ctx, fresh, time.Minute); !errors.Is(err, replay.ErrBusy) {
		t.Fatalf("Claim(pending) = %v, want ErrBusy", err)
	}
	// Not written for longer than busyFor: abandoned, taken over.
	if got, err := store.Claim(ctx, fresh, 0); err != nil || got.Status != delivery.StatusPending {
		t.Fatalf("Claim(abandoned) = %+v, %v", got, err)
	}

	// Delivered before: pending again, with the stored body and history.
	sent := delivery.New(uuid.NewString(), ws, delivery.EventPostbackReceived, []byte(`{"first":1}`), now)
	if _, _, err := deliveries.Create(ctx, sent); err != nil {
		t.Fatal(err)
	}
	sent.Record(delivery.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, ResponseStatus: 200})
	sent.Finish()
	if _, err := deliveries.Finish(ctx, sent, 0, nil); err != nil {
		t.Fatal(err)
	}
	again := delivery.New(sent.ID, ws, delivery.EventPostbackReceived, []byte(`{"rendered":"again"}`), now.Add(time.Hour))
	got, err = store.Claim(ctx, again, time.Minute)
	if err != nil || got.Status != delivery.StatusPending || string(got.Payload) != `{"first":1}` || got.Attempts != 1 ||
		len(got.History) != 1 || got.NextAttempt() != 2 || !got.CreatedAt.Equal(now) || got.DeliveredAt == nil {
		t.Fatalf("Claim(delivered) = %+v, %v", got, err)
	}

	// Another workspace's id: never touched.
	foreign := delivery.New(sent.ID, uuid.NewString(), delivery.EventPostbackReceived, []byte(`{}`), now)
	if _, err := store.Claim(ctx, foreign, 0); !errors.Is(err, delivery.ErrMalformedEvent) {
		t.Fatalf("Claim(foreign) = %v, want ErrMalformedEvent", err)
	}

	// CreateSkipped records a missing delivery and leaves a stored one.
	skipped := delivery.NewSkipped(uuid.NewString(), ws, delivery.EventMessageReceived, []byte(`{}`), now)
	if err := store.CreateSkipped(ctx, skipped); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSkipped(ctx, delivery.NewSkipped(sent.ID, ws, delivery.EventPostbackReceived, []byte(`{}`), now)); err != nil {
		t.Fatal(err)
	}
	rows, err := deliveries.List(ctx, ws, delivery.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]delivery.Status{}
	for _, d := range rows {
		status[d.ID] = d.Status
	}
	if len(rows) != 3 || status[skipped.ID] != delivery.StatusSkipped || status[sent.ID] != delivery.StatusPending {
		t.Errorf("log after CreateSkipped: %v", status)
	}
}
