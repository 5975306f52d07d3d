package adapters_test

import (
	"context"
	"io/fs"
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
