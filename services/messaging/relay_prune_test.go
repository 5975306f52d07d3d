package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// TestRelayPrunesIngressReceipts runs the service, and with it its relay,
// over a database holding receipts of every age: its first pass deletes
// those older than INGRESS_DEDUPE_RETENTION, with the published events
// older than OUTBOX_RETENTION, and keeps the rest.
func TestRelayPrunesIngressReceipts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	chID := uuid.NewString()
	if err := gdb.Exec(`INSERT INTO messaging.channels (id, workspace_id, kind, secret) VALUES (?, ?, 'telegram', 's')`, chID, uuid.NewString()).Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ages := map[string]time.Duration{
		"telegram:update:1": 200 * time.Hour,
		"telegram:update:2": 30*time.Hour + time.Minute,
		"meta:mid:m.3":      30 * time.Hour,
		"telegram:update:4": 29 * time.Hour,
		"telegram:update:5": time.Minute,
	}
	for key, age := range ages {
		if err := gdb.Exec(`INSERT INTO messaging.ingress_receipts (channel_id, key, received_at) VALUES (?, ?, ?)`, chID, key, now.Add(-age)).Error; err != nil {
			t.Fatal(err)
		}
	}

	// The service with its relay's periods and retentions as this test
	// wants them; its first pass prunes.
	cfg := testConfig(t, env, "http://127.0.0.1:9")
	cfg.OutboxPollInterval, cfg.IngressDedupeRetention = time.Second, 30*time.Hour
	startInstance(t, env, cfg)

	keys := func() map[string]bool {
		var got []string
		if err := gdb.Raw(`SELECT key FROM messaging.ingress_receipts`).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, k := range got {
			m[k] = true
		}
		return m
	}
	wait.Until(t, 5*time.Second, "old receipts pruned", func() bool { return len(keys()) < len(ages) })
	got := keys()
	for key, age := range ages {
		if want := age < 30*time.Hour; got[key] != want {
			t.Errorf("receipt %s aged %s kept = %v, want %v", key, age, got[key], want)
		}
	}
}

// TestRelayPrunesPeriodically checks the job's schedule: receipts that age
// past the retention while the relay runs go on its next pass, and a task
// that fails holds up neither the others nor the relay.
func TestRelayPrunesPeriodically(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.telegramChannel(uuid.NewString(), "auto")
	var failures atomic.Int64
	relay := app.NewRelay(app.RelayDeps{
		Store: adapters.NewOutboxStore(h.db), Publisher: adapters.NewJetStreamPublisher(h.env.JetStream(t), h.env.Stream),
		Poll: 20 * time.Millisecond, PruneEvery: 50 * time.Millisecond,
		Prune: []app.PruneTask{
			{Name: "broken", Retention: time.Hour, Prune: func(context.Context, time.Time) (int64, error) {
				failures.Add(1)
				return 0, errors.New("table is gone")
			}},
			{Name: "ingress_receipts", Retention: time.Hour, Prune: adapters.NewIngressReceiptStore(h.db).Prune},
		},
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 5, First: "Kim", Date: t0.Unix(), Text: "fresh"})
	for i := 0; i < 2; i++ {
		// A receipt that has just aged past the retention, written while
		// the relay runs.
		key := uuid.NewString()
		h.db.Exec(`INSERT INTO messaging.ingress_receipts (channel_id, key, received_at) VALUES (?, ?, now() - interval '61 minutes')`, ch.ID, key)
		wait.Until(t, 5*time.Second, "the aged receipt pruned", func() bool {
			return h.count("ingress_receipts", "key = ?", key) == 0
		})
	}
	if n := h.count("ingress_receipts", "key = 'telegram:update:1'"); n != 1 {
		t.Fatalf("the fresh receipt was pruned")
	}
	if failures.Load() < 2 {
		t.Fatalf("the failing task ran %d times, want a run on every pass", failures.Load())
	}
	// The receipt inside the retention still drops a redelivery.
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 5, First: "Kim", Date: t0.Unix(), Text: "fresh"})
	if n := h.count("messages", ""); n != 1 {
		t.Fatalf("messages = %d: a receipt inside the retention must still dedupe", n)
	}
}
