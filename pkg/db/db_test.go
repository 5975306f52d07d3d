package db_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/testenv"
)

type Widget struct {
	ID   int64
	Name string
}

// Several instances start at once: the advisory lock lets one migrate and
// the others find the schema up to date, and tables land in the schema.
func TestOpenMigratesOnceUnderConcurrentStarts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	migrations := os.DirFS("testdata/migrations")

	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gdb, err := db.Open(context.Background(), env.DatabaseURL, "widgets", migrations, zap.NewNop())
			if err == nil {
				err = db.Close(gdb)
			}
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}

	gdb := env.DB(t, "widgets", migrations)
	if err := gdb.Create(&Widget{Name: "a"}).Error; err != nil {
		t.Fatalf("insert through the schema-qualified name: %v", err)
	}
	err := gdb.Create(&Widget{Name: "a"}).Error
	if !db.IsUniqueViolation(err) {
		t.Fatalf("duplicate insert error = %v, want a unique violation", err)
	}
	var applied int64
	if err := gdb.Raw(`SELECT count(*) FROM widgets.goose_db_version WHERE version_id = 1`).Scan(&applied).Error; err != nil || applied != 1 {
		t.Fatalf("migration 1 recorded %d times (%v), want once", applied, err)
	}
}
