package db_test

import (
	"context"
	"database/sql"
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

// A setting given to Open is on every connection of the pool, over the
// database's default, from the first statement on.
func TestOpenStartsEachConnectionWithItsSettings(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	migrations := os.DirFS("testdata/migrations")
	if err := env.DB(t, "widgets", migrations).Exec(`DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L', current_database(), '7s');
	END $$`).Error; err != nil {
		t.Fatal(err)
	}
	gdb := env.DB(t, "widgets", migrations, db.Setting{Name: "lock_timeout", Value: "3s"}, db.Setting{Name: "parley.test", Value: "on"})
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	// Several connections at once: each is a new one, started as Open says.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		if conns[i], err = sqlDB.Conn(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	for i, c := range conns {
		var lockTimeout, custom string
		if err := c.QueryRowContext(context.Background(), `SELECT current_setting('lock_timeout'), current_setting('parley.test')`).Scan(&lockTimeout, &custom); err != nil {
			t.Fatal(err)
		}
		if lockTimeout != "3s" || custom != "on" {
			t.Errorf("connection %d: lock_timeout %s, parley.test %s; want 3s, on", i, lockTimeout, custom)
		}
	}
}
