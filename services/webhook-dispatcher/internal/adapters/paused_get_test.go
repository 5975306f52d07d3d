package adapters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// The pause the count of an outcome makes is stored with its time through
// the group-commit path, read back by the group read (Get) and by Update,
// and cleared by a re-save (Update) and by a save (Put).
func TestPausedAtIsStoredAndCleared(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ctx := context.Background()
	ws := uuid.NewString()
	hook := s.saveWebhook(t, ws)
	if hook.PausedAt != nil {
		t.Fatalf("a saved webhook has paused_at %s", hook.PausedAt)
	}

	at := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	pause := func(w *webhook.Webhook) bool {
		changed, _ := w.RecordDelivery(false, 1, at)
		return changed
	}
	if _, err := s.deliveries.Finish(ctx, s.finished(t, ws, false), 0, pause); err != nil {
		t.Fatal(err)
	}
	got, err := s.webhooks.Get(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != webhook.StatusPaused || got.PausedAt == nil || !got.PausedAt.Equal(at) {
		t.Fatalf("after the pause: %s, paused_at %v; want paused at %s", got.Status, got.PausedAt, at)
	}

	resaved, err := s.webhooks.Update(ctx, ws, func(w *webhook.Webhook) error {
		if w.PausedAt == nil || !w.PausedAt.Equal(at) {
			t.Errorf("Update reads paused_at %v, want %s", w.PausedAt, at)
		}
		w.Resave("whsec_new", at.Add(time.Hour))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.webhooks.Get(ctx, ws); resaved.PausedAt != nil || got.PausedAt != nil || got.Status != webhook.StatusActive {
		t.Fatalf("after a re-save: %s, paused_at %v (returned %v); want active, none", got.Status, got.PausedAt, resaved.PausedAt)
	}

	if _, err := s.deliveries.Finish(ctx, s.finished(t, ws, false), 0, pause); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.webhooks.Get(ctx, ws); got.PausedAt == nil {
		t.Fatal("paused again without paused_at")
	}
	saved := s.saveWebhook(t, ws)
	if got, _ := s.webhooks.Get(ctx, ws); saved.PausedAt != nil || got.PausedAt != nil || got.Status != webhook.StatusActive {
		t.Fatalf("after a save: %s, paused_at %v (returned %v); want active, none", got.Status, got.PausedAt, saved.PausedAt)
	}
}

// Get reads one delivery of the workspace with its attempts; another
// workspace's, an unknown id and a malformed one are not found.
func TestGetDelivery(t *testing.T) {
	t.Parallel()
	s := newStores(t)
	ctx := context.Background()
	ws := uuid.NewString()
	s.saveWebhook(t, ws)
	d := s.finished(t, ws, false)
	d.Record(delivery.Attempt{Number: 2, StartedAt: d.CreatedAt.Add(time.Second), Duration: 1500 * time.Microsecond, ResponseStatus: 204})
	d.Finish()
	if _, err := s.deliveries.Finish(ctx, d, 0, nil); err != nil {
		t.Fatal(err)
	}

	got, err := s.deliveries.Get(ctx, ws, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != d.ID || got.Status != delivery.StatusDelivered || string(got.Payload) != string(d.Payload) || len(got.History) != 2 {
		t.Fatalf("Get = %+v", got)
	}
	first, second := got.History[0], got.History[1]
	if first.Number != 1 || first.ResponseStatus != 500 || first.Error != "receiver answered 500" || !first.StartedAt.Equal(d.CreatedAt) {
		t.Errorf("attempt 1 = %+v", first)
	}
	if second.Number != 2 || second.ResponseStatus != 204 || second.Error != "" || second.Duration != 1500*time.Microsecond {
		t.Errorf("attempt 2 = %+v", second)
	}

	for name, ids := range map[string][2]string{
		"another workspace's": {uuid.NewString(), d.ID},
		"unknown":             {ws, uuid.NewString()},
		"malformed":           {ws, "not-a-uuid"},
		"malformed workspace": {"nope", d.ID},
	} {
		if _, err := s.deliveries.Get(ctx, ids[0], ids[1]); !errors.Is(err, delivery.ErrNotFound) {
			t.Errorf("%s: Get = %v, want ErrNotFound", name, err)
		}
	}
}
