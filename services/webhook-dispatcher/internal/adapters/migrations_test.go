package adapters_test

import (
	"context"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// A webhook the pause rule paused before paused_at existed takes its last
// update as its pause time when the column is added (the pause was that
// update); an active one has none.
func TestMigrationBackfillsPausedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)

	// db.Migrate applies every migration it is given, so the schema as it
	// was before 00002 comes from the first file alone.
	first, err := fs.ReadFile(migrations.FS, "00001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	before, err := db.Open(ctx, env.DatabaseURL, adapters.Schema, fstest.MapFS{"00001_init.sql": {Data: first}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(before) })
	created := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	pausedUpdate := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	paused, active := uuid.NewString(), uuid.NewString()
	for _, w := range []struct {
		ws, status string
		updated    time.Time
	}{{paused, "paused", pausedUpdate}, {active, "active", created.Add(time.Hour)}} {
		err := before.Exec(`INSERT INTO `+adapters.Schema+`.webhooks
			(id, workspace_id, url, secret, status, consecutive_failures, created_at, updated_at)
			VALUES (?, ?, 'https://hooks.example.com/in', 'whsec_test', ?, 0, ?, ?)`,
			uuid.NewString(), w.ws, w.status, created, w.updated).Error
		if err != nil {
			t.Fatal(err)
		}
	}

	webhooks := adapters.NewWebhookStore(env.DB(t, adapters.Schema, migrations.FS))
	got, err := webhooks.Get(ctx, paused)
	if err != nil {
		t.Fatal(err)
	}
	if got.PausedAt == nil || !got.PausedAt.Equal(got.UpdatedAt) || !got.UpdatedAt.Equal(pausedUpdate) {
		t.Errorf("paused webhook: paused_at %v, updated_at %s; want both %s", got.PausedAt, got.UpdatedAt, pausedUpdate)
	}
	if got, err = webhooks.Get(ctx, active); err != nil {
		t.Fatal(err)
	}
	if got.PausedAt != nil {
		t.Errorf("active webhook: paused_at %s, want none", got.PausedAt)
	}
}

// The delivery log keeps no index on created_at for every row (the purge
// goes by the ids' UUIDv7 order), and leaves room on each page for the
// updates of the rows still updated (migration 00003).
func TestDeliveriesIndexesAndFillfactor(t *testing.T) {
	t.Parallel()
	gdb := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS)).DB(t, adapters.Schema, migrations.FS)
	var indexes []string
	if err := gdb.Raw(`SELECT indexname FROM pg_indexes WHERE schemaname = 'dispatch' AND tablename = 'deliveries' ORDER BY indexname`).Scan(&indexes).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{"deliveries_not_v7_created_idx", "deliveries_pkey", "deliveries_workspace_created_idx"}
	if !slices.Equal(indexes, want) {
		t.Errorf("indexes %v, want %v", indexes, want)
	}
	var options []string
	if err := gdb.Raw(`SELECT unnest(reloptions) FROM pg_class WHERE oid = 'dispatch.deliveries'::regclass`).Scan(&options).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(options, []string{"fillfactor=80"}) {
		t.Errorf("reloptions %v, want fillfactor=80", options)
	}
}
