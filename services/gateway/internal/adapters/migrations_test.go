package adapters_test

import (
	"context"
	"io/fs"
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	"github.com/parleyhq/parley/services/gateway/migrations"
)

// Workspaces that existed before features could be switched off get
// flows_api as every new one does (on), and one an operator had switched
// on keeps it on.
func TestMigrationOpensFlowsAPIToExistingWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)

	// db.Open applies every migration it is given, so the schema as it was
	// before 00003 comes from the first two files alone.
	before := fstest.MapFS{}
	for _, name := range []string{"00001_init.sql", "00002_api_key_last_used.sql"} {
		data, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: data}
	}
	old, err := db.Open(ctx, env.DatabaseURL, adapters.Schema, before, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(old) })
	untouched, switchedOn := uuid.NewString(), uuid.NewString()
	for _, w := range []struct {
		id, slug, features string
	}{{untouched, "untouched", "{}"}, {switchedOn, "switched-on", "{flows_api}"}} {
		err := old.Exec(`INSERT INTO `+adapters.Schema+`.workspaces (id, name, slug, modules, features)
			VALUES (?, ?, ?, '{developer_api,flows}', ?)`, w.id, w.slug, w.slug, w.features).Error
		if err != nil {
			t.Fatal(err)
		}
	}

	workspaces := adapters.NewWorkspaceStore(env.DB(t, adapters.Schema, migrations.FS))
	for _, id := range []string{untouched, switchedOn} {
		w, err := workspaces.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.EnabledFeatures(); !reflect.DeepEqual(got, []string{"flows_api"}) {
			t.Errorf("workspace %s after the migration: features %v, want [flows_api]", w.Slug, got)
		}
	}
}
